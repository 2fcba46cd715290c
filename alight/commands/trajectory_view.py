"""A trajectory for people: a rich timeline of model calls and tool spans, then the rewards."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from alight.commands.console import output_console
from alight.schemas import ToolSpan, Trajectory, TrajectoryCall

PATH_SEP = " › "


def _clip(text: str, width: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def call_summary(joined: TrajectoryCall) -> str:
    """What the model answered (the server read it from any API flavour): the tools it called, else its text; the
    error for a failed call."""
    call, output = joined.call, joined.output
    if call.error or call.status_code >= 400:
        return f"[red]{call.status_code} {_clip(call.error or '')}[/red]"
    if output.tool_calls:
        return "calls " + ", ".join(tool.name for tool in output.tool_calls)
    return _clip(output.text)


def _tool_text(span: ToolSpan) -> str:
    args = span.arguments
    with_args = args if isinstance(args, str) else ("" if args is None else json.dumps(args))
    result = span.result
    return _clip(f"{span.tool_name or span.name}({with_args})" + (f" -> {result}" if result else ""))


def render_trajectory(trajectory: Trajectory, console: Console | None = None) -> None:
    console = console or output_console()
    status = trajectory.attempt_status.value if trajectory.attempt_status else "?"
    failure = f" ({trajectory.failure_kind.value})" if trajectory.failure_kind else ""
    final = "none" if trajectory.final_reward is None else f"{trajectory.final_reward:g}"
    console.print(
        f"[bold]rollout[/bold] {trajectory.rollout_id}  attempt {trajectory.attempt}  "
        f"state {trajectory.state.value}  attempt {status}{failure}  final reward [bold]{final}[/bold]"
    )
    table = Table(title=f"{len(trajectory.calls)} model calls, {len(trajectory.tool_spans)} tool spans")
    for column in ("#", "span path", "agent", "what", "tokens in/out", "step rewards"):
        table.add_column(column, overflow="fold")

    def add_tools(index: int) -> None:
        for span in (s for s in trajectory.tool_spans if s.after_call == index):
            path = PATH_SEP.join(span.span_path)
            table.add_row("tool", f"[dim]{path}[/dim]", span.agent_name or "", _tool_text(span), "", "")

    add_tools(-1)
    for index, joined in enumerate(trajectory.calls):
        call = joined.call
        tokens = f"{len(call.prompt_token_ids)}/{len(call.response_token_ids)}"
        flags = f" [yellow]{','.join(call.flags)}[/yellow]" if call.flags else ""
        table.add_row(
            str(call.seq),
            PATH_SEP.join(joined.span_path) or "[dim](no span)[/dim]",
            joined.agent_name or "",
            f"{call.flavour.value}: {call_summary(joined)}{flags}",
            tokens,
            ", ".join(f"{r.name or 'reward'}={r.value:g}" for r in joined.rewards),
        )
        add_tools(index)
    console.print(table)
    if trajectory.rewards:
        rewards = Table(title="rewards")
        for column in ("value", "name", "final", "source", "linked to"):
            rewards.add_column(column)
        for r in trajectory.rewards:
            link = f"call {r.model_call_id}" if r.model_call_id else (f"span {r.span_id}" if r.span_id else "")
            rewards.add_row(f"{r.value:g}", r.name or "", "yes" if r.final else "", r.source.value, link)
        console.print(rewards)
    else:
        console.print("[dim]no rewards recorded[/dim]")
