"""tests/cluster: the rig tests of the Kubernetes edge and (admission/) of the live admission loop. Being a
conftest, this file puts tests/cluster on the import path, so every test below it can use cluster_rig.py."""
