"""Exporters: a loopbench cluster and trace to another format, for the tools that read it.

`kubernetes` writes Nodes, Pods and PodGroups that `loopbench import kubernetes` reads back;
`cli` is `loopbench export`.
"""
