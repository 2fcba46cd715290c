"""The stacks a training run or an evaluation runs against: the embedded one in this process tree, or servers you started."""
