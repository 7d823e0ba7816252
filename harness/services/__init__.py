"""Inference services: replica autoscaling, service traces, demand."""
