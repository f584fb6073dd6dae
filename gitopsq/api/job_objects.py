"""batch/v1 Job and jobset.x-k8s.io JobSet as the API server sends them: the fields gitopsq reads or writes,
every key optional (the server omits empty fields)."""

from __future__ import annotations

from typing import TypedDict

from gitopsq.api.pod_object import PodTemplateSpec
from gitopsq.api.raw_objects import Condition, ObjectMeta


class JobSpec(TypedDict, total=False):
    parallelism: int
    completions: int
    suspend: bool
    template: PodTemplateSpec


class UncountedTerminatedPods(TypedDict, total=False):
    succeeded: list[str]
    failed: list[str]


class JobStatus(TypedDict, total=False):
    active: int
    terminating: int
    ready: int
    succeeded: int
    failed: int
    startTime: str
    conditions: list[Condition]
    uncountedTerminatedPods: UncountedTerminatedPods


class JobObject(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: JobSpec
    status: JobStatus


class JobTemplateSpec(TypedDict, total=False):
    metadata: ObjectMeta
    spec: JobSpec


class ReplicatedJob(TypedDict, total=False):
    name: str
    replicas: int
    template: JobTemplateSpec


class ReplicatedJobStatus(TypedDict, total=False):
    """One replicated job's child Jobs by state (a JobSet's ``replicatedJobsStatus``, a TrainJob's ``jobsStatus``)."""

    name: str
    ready: int
    succeeded: int
    failed: int
    active: int
    suspended: int


class JobSetSpec(TypedDict, total=False):
    replicatedJobs: list[ReplicatedJob]
    suspend: bool


class JobSetStatus(TypedDict, total=False):
    conditions: list[Condition]
    replicatedJobsStatus: list[ReplicatedJobStatus]


class JobSetObject(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: JobSetSpec
    status: JobSetStatus
