"""The reference host-service model (docs/host-service-model.md): guest UVM and RM state, the host's
sema service, the policies that tell the fixed service from the legacy one, and what it emits."""
