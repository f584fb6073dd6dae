"""The live admission loop: the admission core's decisions (gitopsq.admission) made real on an API server.

loop.py runs passes; passes.py decides (decisions.py) and writes back (writer.py, workload_status.py);
job_reconciler.py and integrations/ tie Jobs to their Workloads; watch_cache.py, workload_index.py and
rate_limited.py are what it reads through; queue_status.py and pass_audit.py report. ports.py types what they
hand each other. The Kubernetes edge it stands on (client, errors, kinds) is gitopsq.cluster.
"""
