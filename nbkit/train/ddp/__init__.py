"""DDP under torchrun: the process group, when to join it, the launcher watch and the resumable
distributed sampler. The contract is stated once, in ``docs/distributed.md``."""
