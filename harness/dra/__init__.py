"""Dynamic Resource Allocation (resource.k8s.io/v1) as kube-scheduler's structured allocator sees it.

A node publishes its devices in ResourceSlices (`resources.ResourceSlice`): each device with
attributes and capacities, partitionable devices drawing on a slice's shared counters, and
multi-allocatable devices whose capacity is shared out by request. DeviceClasses select devices;
a pod's ResourceClaims ask for devices by class, CEL selector (`cel`), count or All, prioritized
alternatives and matchAttribute constraints. `allocator` finds, for every node at once, whether a
pod's claims can be allocated there and which devices they get.
"""
