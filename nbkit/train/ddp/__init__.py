"""DDP under torchrun: the process group, when to join it, the launcher watch, the loop's sharding and
its resumable distributed sampler. The contract is stated once, in ``docs/distributed.md``."""
