"""The scheduler ("FPC") mode: etcd presence, containers created on demand, activations pulled over gRPC."""
