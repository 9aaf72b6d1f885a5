"""Bench-only baseline: the extender request modelled the naive way, as full pydantic models
of every field kube-scheduler sends (what a FastAPI body parameter would parse)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel


class OwnerReference(BaseModel):
    apiVersion: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


class ObjectMeta(BaseModel):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""
    creationTimestamp: datetime | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    ownerReferences: list[OwnerReference] = []
    managedFields: list[dict[str, Any]] = []


class Condition(BaseModel):
    type: str
    status: str
    lastHeartbeatTime: datetime | None = None
    lastTransitionTime: datetime | None = None
    reason: str = ""
    message: str = ""


class Address(BaseModel):
    type: str
    address: str


class Image(BaseModel):
    names: list[str] = []
    sizeBytes: int = 0


class NodeSystemInfo(BaseModel):
    machineID: str = ""
    systemUUID: str = ""
    bootID: str = ""
    kernelVersion: str = ""
    osImage: str = ""
    containerRuntimeVersion: str = ""
    kubeletVersion: str = ""
    kubeProxyVersion: str = ""
    operatingSystem: str = ""
    architecture: str = ""


class NodeStatus(BaseModel):
    capacity: dict[str, str] = {}
    allocatable: dict[str, str] = {}
    conditions: list[Condition] = []
    addresses: list[Address] = []
    daemonEndpoints: dict[str, Any] = {}
    nodeInfo: NodeSystemInfo = NodeSystemInfo()
    images: list[Image] = []


class NodeSpec(BaseModel):
    podCIDR: str = ""
    providerID: str = ""
    unschedulable: bool = False


class Node(BaseModel):
    metadata: ObjectMeta = ObjectMeta()
    spec: NodeSpec = NodeSpec()
    status: NodeStatus = NodeStatus()


class NodeListModel(BaseModel):
    items: list[Node] = []


class PodModel(BaseModel):
    metadata: ObjectMeta = ObjectMeta()
    spec: dict[str, Any] = {}
    status: dict[str, Any] = {}


class ExtenderArgs(BaseModel):
    Pod: PodModel | None = None
    Nodes: NodeListModel | None = None
    NodeNames: list[str] | None = None
