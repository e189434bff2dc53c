"""The parameter-server workloads: a headless Service and a StatefulSet for the shards, an
Indexed Job for the workers (see :mod:`distconv.deploy.render`)."""

from __future__ import annotations

from distconv.deploy.pod import (
    HEALTH_PORT,
    KEYS_DIR,
    WORK_DIR,
    WORKER_RESOURCES,
    Manifest,
    _cpus,
    _env,
    _JobBase,
    _keys_mount,
    _library_env,
    _port,
    _tmp_volume,
    _work_volume,
)
from distconv.endpoint import join_endpoint
from distconv.shard_timeout import shard_timeout_args

#: the shards' port inside their pods
PS_PORT = 5555
#: each shard's checkpoint parts (a PersistentVolumeClaim per shard)
CHECKPOINT_DIR = "/var/lib/distconv/checkpoints"
#: the shard's StatefulSet pods carry their ordinal in this label (Kubernetes >= 1.28)
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"

SERVER_RESOURCES = {"cpu": "1", "memory": "2Gi"}
#: restarts the workers' Job allows a worker, on average (its ``backoffLimit`` over ``workers``):
#: two incidents of a sync job's lifetime, one worker restarted alone each time, at 5 apiece
WORKER_RESTARTS = 10


class _PserverWorkloads(_JobBase):
    """The shards' Service and StatefulSet and the workers' Indexed Job of one job."""

    def pserver_addresses(self) -> list[str]:
        """Every shard's stable DNS name and port, in shard order."""
        return [f"{self.pserver}-{i}.{self.pserver}:{PS_PORT}" for i in range(self.servers)]

    def pserver_service(self) -> Manifest:
        """Headless, and publishing pods before they are ready: workers must reach the shards
        to seed them, and a shard is only ready once seeded."""
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": self.metadata(self.pserver, "pserver"),
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": True,
                "selector": self.selector("pserver"),
                "ports": [
                    {"name": "ps", "port": PS_PORT, "targetPort": "ps"},
                    {"name": "health", "port": HEALTH_PORT, "targetPort": "health"},
                ],
            },
        }

    def pserver_statefulset(self) -> Manifest:
        args = ["distconv", "pserver", "--bind", join_endpoint(self.any_address, PS_PORT)]
        args += ["--shard", "$(DISTCONV_SHARD)", "--num-shards", str(self.servers)]
        args += ["--workers", str(self.workers), "--mode", self.mode, "--keys", KEYS_DIR]
        if self.max_staleness is not None:  # async: else the shards' default (4)
            args += ["--max-staleness", str(self.max_staleness)]
        # the workers' --timeout: a shard at 60 s outwaits workers at 10 (they give up at 15),
        # so a worker that never came was blamed on a healthy shard
        args += shard_timeout_args(self.train_args)
        args += ["--checkpoint-dir", CHECKPOINT_DIR, *self.health_args()]
        # only what a shard reads: its job id, its index; its keys come from --keys alone
        # (distconv pserver reads no DISTCONV_KEYS, DISTCONV_ROLE nor DISTCONV_WORLD_SIZE: set,
        # they would mislead whoever edits the args)
        env = [_env("DISTCONV_JOB_ID", self.name), *_library_env(_cpus(SERVER_RESOURCES))]
        env += [
            {
                "name": "DISTCONV_SHARD",
                "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{POD_INDEX_LABEL}']"}},
            },
        ]
        container = self.container(
            "pserver",
            args,
            SERVER_RESOURCES,
            env=env,
            mounts=[_keys_mount(), {"name": "checkpoints", "mountPath": CHECKPOINT_DIR}],
            ports=[_port("ps", PS_PORT), _port("health", HEALTH_PORT)],
            shard=True,
        )
        claim = {
            "metadata": {"name": "checkpoints", "labels": self.labels("pserver")},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
        return {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": self.metadata(self.pserver, "pserver"),
            "spec": {
                "serviceName": self.pserver,
                "replicas": self.servers,
                # shards are peers, not a chain: start and replace them all at once
                "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": self.selector("pserver")},
                "template": {
                    "metadata": {"labels": self.labels("pserver")},
                    "spec": self.pod_spec(container, [_tmp_volume(), self.keys_volume("server")]),
                },
                "volumeClaimTemplates": [claim],
            },
        }

    def keys_volume(self, side: str) -> Manifest:
        """The ``side`` (``"server"`` or ``"worker"``) Secret: each side gets only its keys."""
        # 0440 + fsGroup: readable by the non-root user's group, by nobody else
        return {
            "name": "keys",
            "secret": {"secretName": f"{self.name}-{side}-keys", "defaultMode": 0o440},
        }

    def worker_job(self) -> Manifest:
        servers = ",".join(self.pserver_addresses())
        args = ["distconv", "train", "--sync", "pserver", "--pservers", servers]
        args += ["--keys", KEYS_DIR, *self.health_args(), *self.train_argv()]
        env = self.rank_env("worker", self.workers, _cpus(WORKER_RESOURCES), self.gpus > 0)
        env += [_env("DISTCONV_PSERVERS", servers), _env("DISTCONV_KEYS", KEYS_DIR)]
        container = self.container(
            "worker",
            args,
            WORKER_RESOURCES,
            env=env,
            mounts=[_keys_mount(), {"name": "work", "mountPath": WORK_DIR}],
            ports=[_port("health", HEALTH_PORT)],
            gpus=self.gpus,
        )
        container["workingDir"] = WORK_DIR
        volumes = [_tmp_volume(), self.keys_volume("worker"), _work_volume()]
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": self.metadata(f"{self.name}-worker", "worker"),
            "spec": {
                "completionMode": "Indexed",
                "completions": self.workers,
                "parallelism": self.workers,
                # every worker's container restarts count, over the Job's whole life: after one
                # worker's crash the shards fail the job at their --timeout (60 s), the workers
                # restart (the kubelet waits 10, 20, 40, 80 s) and are refused until the failed
                # shards' liveness restarts them (about 90 s more): 4 restarts a worker, and the
                # one that resumes. 3 a worker ran the Job out just as the shards came back, and
                # 6 at the second such incident; 10 outlast two
                "backoffLimit": WORKER_RESTARTS * self.workers,
                "template": {
                    "metadata": {"labels": self.labels("worker")},
                    # OnFailure restarts the container in the same pod, so the run directory
                    # (and the chief's checkpoint in it) survives for --resume
                    "spec": self.pod_spec(container, volumes, restartPolicy="OnFailure"),
                },
            },
        }
