"""A DRA run's allocations written back as Kubernetes would hold them (`write_claims=true`):
each binding of a pod with claims becomes, per claim, a resource.k8s.io/v1 ResourceClaim whose
spec is the claim as the pod asked it and whose status is the allocation the scheduler made at
bind time (devices by driver, pool and name, and the node it is bound to), so a run's placements
can be read, diffed or applied beside a real cluster's; and a compact table of the same, one row
per allocated device, with when the pod was bound and released.

A claim is named as the ResourceClaim controller names one it generates from a pod's template,
`<pod>-<claim>-<suffix>`, with a suffix drawn from the pod, the claim and the binding's ordinal
rather than at random, so two runs write the same bytes. A node is `<pool>-<k>` (the k-th slot of
its pool, as `loopbench export kubernetes` names nodes); a device's pool is its node's name where
the cluster translates the node type's columns (a node-local pool, as drivers name it), else the
pool its type's declared slices name. The DeviceClasses the claims use come first, so
`loopbench import dra` reads the file back whole.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np
import polars as pl
import yaml

from harness.dra.layer import ClaimedGpus
from harness.dra.resources import ALL, API_VERSION, Claim, DeviceClass, DeviceRequest
from harness.dra.translate import WHOLE

#: upstream's random-name alphabet (k8s.io/apimachinery/pkg/util/rand): no vowels, no look-alikes
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_NOT_NAME = re.compile(r"[^a-z0-9.-]+")


@dataclass(frozen=True)
class _Binding:
    pod: int
    node: int
    bound_at: float
    ordinal: int  # how many times this pod was bound before
    claims: tuple[Claim, ...]
    #: (claim, request, driver, pool, device, capacity consumed) per allocated device
    results: tuple[tuple[int, str, str, str, str, dict[str, int]], ...]


class ClaimWriter:
    """Listens to a DRA simulation's binds and releases; `documents` and `frame` give what it heard."""

    def __init__(self, sim):
        assert sim.state.dra is not None, "claims are written only in a DRA cluster"
        self.sim = sim
        self.bindings: list[_Binding] = []
        self.released_at: list[float] = []
        self.open: dict[int, int] = {}  # pod -> its current binding
        self.times: dict[int, int] = {}  # pod -> bindings so far
        sim.hooks.bound.append(self.bound)
        sim.hooks.left.append(self.left)

    def bound(self, p: int, n: int) -> None:
        gpus = self.sim.pod_gpus[p]
        if not isinstance(gpus, ClaimedGpus):
            return
        sim, st = self.sim, self.sim.state
        w = sim.w
        assert w.claim is not None and st.dra is not None
        claims = w.claim_sets[int(w.claim[p])]
        t = int(st.dra_type[n])  # a node booting on its template: the devices planned
        devices, cc = st.dra.devices[t], st.dra.compiled(claims, t)[0]
        translated = all(s.pool == sim.cluster.node_types[st.slot_type[n]].name for s in devices.slices)  # per node
        request_of = np.searchsorted(cc.opt_end, np.arange(len(cc.options)), side="right")
        results = []
        for o, d in gpus.pairs.tolist():
            r = int(request_of[o])
            driver, pool, device = devices.names[d].split("/", 2)
            consumed = {_local(devices.capacities[q], driver): int(cc.take_cap[o, d, q])
                        for q in np.flatnonzero(cc.take_cap[o, d] > 0).tolist()} if devices.multi[d] else {}
            results.append((int(cc.req_claim[r]), cc.options[o].split("/", 1)[1], driver,
                            self.node_name(n) if translated else pool, device, consumed))
        k = self.times.get(p, 0)
        self.times[p] = k + 1
        self.open[p] = len(self.bindings)
        self.bindings.append(_Binding(p, n, float(sim.now), k, claims, tuple(results)))
        self.released_at.append(np.nan)

    def left(self, p: int) -> None:
        i = self.open.pop(p, None)
        if i is not None:
            self.released_at[i] = float(self.sim.now)

    def node_name(self, n: int) -> str:
        st = self.sim.state
        pool = int(st.slot_pool[n])
        return f"{self.sim.cluster.pools[pool].name}-{n - int(st.pool_offset[pool])}"

    def claim_name(self, b: _Binding, claim: str) -> tuple[str, str]:
        """(namespace, name) of the claim generated for `claim` of this binding."""
        ns, _, pod = str(self.sim.w.pod_id[b.pod]).rpartition("/")
        digest = hashlib.sha256(f"{self.sim.w.pod_id[b.pod]}\0{claim}\0{b.ordinal}".encode()).digest()
        suffix = "".join(_ALPHABET[x % len(_ALPHABET)] for x in digest[:5])
        return _dns(ns) or "default", f"{_dns(pod)}-{_dns(claim)}-{suffix}"

    def documents(self) -> list[dict]:
        """The DeviceClasses the claims use, then one ResourceClaim per binding and claim."""
        layer = self.sim.state.dra
        used = dict.fromkeys(a.device_class for b in self.bindings for c in b.claims for r in c.requests
                             for a in (r.first_available or (r,)))
        docs = [_device_class(layer.classes[name]) for name in used]
        for b, released in zip(self.bindings, self.released_at, strict=True):
            docs.extend(self._claim(b, ci, released) for ci in range(len(b.claims)))
        return docs

    def _claim(self, b: _Binding, ci: int, released: float) -> dict:
        """The ResourceClaim of claim `ci` of a binding: the spec asked, the allocation made."""
        ns, name = self.claim_name(b, b.claims[ci].name)
        notes = {"loopbench.io/pod": str(self.sim.w.pod_id[b.pod]), "loopbench.io/bound-at": repr(b.bound_at)}
        if not np.isnan(released):
            notes["loopbench.io/released-at"] = repr(released)
        results: list[dict] = []
        for i, req, drv, pool, dev, consumed in b.results:
            if i == ci:
                results.append({"request": req, "driver": drv, "pool": pool, "device": dev})
                if consumed:
                    results[-1]["consumedCapacity"] = {k: _quantity(v) for k, v in consumed.items()}
        on_node = {"key": "metadata.name", "operator": "In", "values": [self.node_name(b.node)]}
        return {"apiVersion": API_VERSION, "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": ns, "annotations": notes},
                "spec": claim_spec(b.claims[ci]),
                "status": {"allocation": {"devices": {"results": results},
                                          "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [on_node]}]}}}}

    def yaml(self) -> str:
        """The documents as one YAML stream (libyaml's emitter where installed: ~10x faster)."""
        return yaml.dump_all(self.documents(), Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)

    def frame(self) -> pl.DataFrame:
        """One row per allocated device: pod, claim, node, request, driver, pool, device, bound_at,
        released_at (null: still bound at the horizon)."""
        rows = [(str(self.sim.w.pod_id[b.pod]), self.claim_name(b, b.claims[ci].name)[1], self.node_name(b.node),
                 req, drv, pool, dev, b.bound_at, None if np.isnan(rel) else rel)
                for b, rel in zip(self.bindings, self.released_at, strict=True)
                for ci, req, drv, pool, dev, _ in b.results]
        names = ("pod", "claim", "node", "request", "driver", "pool", "device", "bound_at", "released_at")
        schema = dict.fromkeys(names[:7], pl.String) | {"bound_at": pl.Float64, "released_at": pl.Float64}
        return pl.DataFrame(rows, schema=schema, orient="row")


def claim_spec(c: Claim) -> dict:
    """A claim's spec as a manifest holds it (what harness.dra.resources.claim reads)."""
    devices: dict = {"requests": [
        {"name": r.name, "firstAvailable": [{"name": a.name, **_exactly(a)} for a in r.first_available]}
        if r.first_available else {"name": r.name, "exactly": _exactly(r)} for r in c.requests]}
    if c.constraints:
        devices["constraints"] = [{**({"requests": list(k.requests)} if k.requests else {}),
                                   "matchAttribute": k.match_attribute} for k in c.constraints]
    return {"devices": devices}


def _exactly(r: DeviceRequest) -> dict:
    out: dict = {"deviceClassName": r.device_class}
    if r.selectors:
        out["selectors"] = [{"cel": {"expression": s}} for s in r.selectors]
    if r.mode == ALL:
        out["allocationMode"] = ALL
    elif r.count != 1:
        out["count"] = r.count
    if r.capacity:
        out["capacity"] = {"requests": {k: _quantity(v) for k, v in r.capacity.items()}}
    if r.tolerations:
        out["tolerations"] = [{k: v for k, v in (("key", t.key), ("operator", t.operator), ("value", t.value),
                                                  ("effect", t.effect)) if v} for t in r.tolerations]
    return out


def _device_class(c: DeviceClass) -> dict:
    spec = {"selectors": [{"cel": {"expression": s}} for s in c.selectors]} if c.selectors else {}
    return {"apiVersion": API_VERSION, "kind": "DeviceClass", "metadata": {"name": c.name}, "spec": spec}


def _quantity(milli: int) -> str:
    """Milli-units as the shortest exact quantity: "2", "300m"."""
    return str(milli // WHOLE) if milli % WHOLE == 0 else f"{milli}m"


def _local(name: str, driver: str) -> str:
    """A capacity's name as its device publishes it: without its driver's domain."""
    return name.removeprefix(f"{driver}/")


def _dns(text: str) -> str:
    """Text as a DNS label's characters (lowercase letters, digits, '-' and '.')."""
    return _NOT_NAME.sub("-", text.lower()).strip("-.")
