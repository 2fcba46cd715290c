"""The evaluator the zero-change training tests name in their configs: the task and the final answer."""


def score(task, trajectory):
    # Varies with the answer's length, so a group of the random tiny model's replies is never uniform,
    # and depends on the task, so a reward shows the evaluator saw it.
    text = trajectory.final_output.text
    return len(text) / (len(text) + len(task["word"]))
