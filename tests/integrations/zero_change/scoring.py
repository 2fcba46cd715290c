"""The evaluator the zero-change training tests name in their configs: the task and the final answer."""

import zlib


def score(task, trajectory):
    # A checksum of the task's word and the answer, in [0, 1): two replies score alike only when they are the
    # same reply (or collide, 1 in 2**32), so a group of two of the random tiny model's replies is not uniform,
    # and it depends on the task, so a reward shows the evaluator saw it.
    text = trajectory.final_output.text
    return zlib.crc32(f"{task['word']}\n{text}".encode()) / 2**32
