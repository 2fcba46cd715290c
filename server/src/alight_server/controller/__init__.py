"""The controller: runs the server's queued attempts through a runner (local subprocesses, or Kubernetes Jobs in k8s/)."""
