"""The standing proof: extract every commit that touches the files read, in each upstream
repository's whole history (every branch), and count what comes out.

For each side the files read are what an extraction at the newest commit read
(``Snapshot.reads``: the engine follows imports, so that is more than the handful of
files the readers name). Every commit of ``git rev-list --all`` that touches one of them
is extracted:

- Brax: the signature defaults and the three Playground families, against the newest
  Playground commit;
- MuJoCo Playground: the three families, against the newest Brax commit;
- SLM-Lab: every variant of the spec, at every such commit where the spec file exists,
  with ``--set max_frame=100000000`` as SLM-Lab's benchmarks run it.

It prints, per side: commits, extractions, crashes (an exception that is not a
``BraxDiffError``), input errors (a ``BraxDiffError``: a file missing at that commit, a
spec that does not parse), unknown keys by cause, unknown keys no finding explains (the
goal is none), SLM-Lab variants that cannot train by cause, and the wall time. With
``--markdown FILE`` the same summary is written as Markdown (``docs/sweep.md``).

    nice python benchmarks/sweep_extract.py --brax-repo /tmp/brax.git \\
        --playground-repo /tmp/playground.git --slm-repo /tmp/slm.git --jobs 2 --markdown docs/sweep.md
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import re
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from brax_diff.errors import BraxDiffError  # noqa: E402
from brax_diff.sources.repository import Repository  # noqa: E402

SPEC = "slm_lab/spec/benchmark_arc/ppo/ppo_playground.yaml"
# The run length SLM-Lab's Playground benchmarks are run with (`-s max_frame=100000000` in the
# spec's usage line): schedules end at ${max_frame}, so a spec needs it to resolve.
SLM_SETS = {"max_frame": "100000000"}
FAMILIES = ("dm_control", "locomotion", "manipulation")


@dataclass
class Outcome:
    """One extraction at one commit."""

    side: str
    sha: str
    scope: str
    status: str  # "ok" | "crash" | "input_error"
    detail: str = ""
    unknown: list = field(default_factory=list)  # (key, cause, explained)
    blocked: str | None = None  # SLM-Lab: why the variant cannot train
    seconds: float = 0.0


def git(repo: str, *args: str) -> list[str]:
    done = subprocess.run(["git", "--git-dir", repo, *args], capture_output=True, text=True, check=True)
    return [line for line in done.stdout.splitlines() if line.strip()]


def newest(repo: str) -> str:
    """The newest commit of the default branch (HEAD of the bare clone)."""
    return git(repo, "rev-parse", "HEAD")[0]


def files_read(snapshots) -> list[str]:
    out: set[str] = set()
    for snapshot in snapshots:
        out |= {path for path, blob in snapshot.reads.items() if blob and not path.endswith("/")}
    return sorted(out)


def touching(repo: str, paths: list[str]) -> list[str]:
    """Every commit on any ref that touches one of ``paths``, oldest first."""
    return list(reversed(git(repo, "rev-list", "--all", "--", *paths)))


def cause_of(reason: str) -> str:
    """An unknown's reason without what varies between commits (shas, lines, numbers)."""
    text = reason.split(": ", 1)[1] if re.match(r"^[a-z_]+: ", reason) else reason
    text = re.sub(r"'playground/[^']*'", "'playground/ENV'", text)
    text = re.sub(r"\b[0-9a-f]{7,40}\b", "<sha>", text)
    text = re.sub(r"\(slm [^)]*\)|\(brax [^)]*\)", "", text)
    text = re.sub(r"(\.py|\.yaml):\d+", r"\1:N", text)
    text = re.sub(r"(?<![\w.])\d+(\.\d+)?(e-?\d+)?(?![\w.])", "N", text)
    text = re.sub(r" at \S+$", "", text.strip())
    text = re.sub(r" in \S*?(\w+)\.git\b", lambda m: f" in {m.group(1).upper()}.git", text)  # no local path
    return text[:200]


def unknowns(extraction) -> list[tuple[str, str, bool]]:
    out = []
    for key in extraction.unknown_keys():
        explained = any(f.key == key for f in extraction.findings)
        out.append((key, cause_of(extraction.facts[key].unknown or ""), explained))
    return out


def run_task(task: tuple) -> list[Outcome]:
    """Extract one commit of one side (in a worker process)."""
    side, sha, repos, others = task
    from brax_diff.extractors.brax.extractor import BraxExtractor
    from brax_diff.extractors.slm.extractor import SlmExtractor, trains

    results: list[Outcome] = []

    def attempt(scope: str, make) -> None:
        start = time.perf_counter()
        try:
            extraction = make()
        except BraxDiffError as exc:
            results.append(Outcome(side, sha, scope, "input_error", str(exc)[:200],
                                   seconds=time.perf_counter() - start))
            return
        except Exception as exc:  # noqa: BLE001 - a crash is what the sweep counts
            tail = traceback.format_exc().strip().splitlines()[-3:]
            results.append(Outcome(side, sha, scope, "crash", f"{type(exc).__name__}: {exc} | {' / '.join(tail)}"[:400],
                                   seconds=time.perf_counter() - start))
            return
        outcome = Outcome(side, sha, scope, "ok", unknown=unknowns(extraction), seconds=time.perf_counter() - start)
        if side == "slm":
            ok, why = trains(extraction)
            outcome.blocked = None if ok else cause_of(why or "")
        results.append(outcome)

    try:
        if side in ("brax", "playground"):
            brax_sha = sha if side == "brax" else others["brax"]
            playground_sha = sha if side == "playground" else others["playground"]
            brax = Repository(repos["brax"], "brax").resolve(brax_sha)
            playground = Repository(repos["playground"], "playground").resolve(playground_sha)
            extractor = BraxExtractor(brax, playground)
            if side == "brax":
                attempt("defaults", extractor.defaults)
            for family in FAMILIES:
                attempt(family, lambda f=family: extractor.family(f))
        else:
            snapshot = Repository(repos["slm"], "slm").resolve(sha)
            extractor = SlmExtractor(snapshot, SPEC, sets=SLM_SETS)
            for variant in extractor.variants():
                attempt(variant, lambda v=variant: extractor.variant(v))
    except BraxDiffError as exc:
        results.append(Outcome(side, sha, "*", "input_error", str(exc)[:200]))
    except Exception as exc:  # noqa: BLE001
        results.append(Outcome(side, sha, "*", "crash", f"{type(exc).__name__}: {exc}"[:400]))
    return results


def plan(repos: dict[str, str]) -> tuple[dict[str, list[str]], dict[str, str], dict[str, list[str]]]:
    """Commits per side, the newest commits used as the other side, and the files read."""
    from brax_diff.extractors.brax.extractor import BraxExtractor
    from brax_diff.extractors.slm.extractor import SlmExtractor

    heads = {"brax": newest(repos["brax"]), "playground": newest(repos["playground"])}
    brax = Repository(repos["brax"], "brax").resolve(heads["brax"])
    playground = Repository(repos["playground"], "playground").resolve(heads["playground"])
    extractor = BraxExtractor(brax, playground)
    extractor.defaults()
    for family in FAMILIES:
        extractor.family(family)
    # SLM-Lab: the newest commit (any branch) that has the spec.
    with_spec = [c for c in git(repos["slm"], "rev-list", "--all", "--", SPEC)]
    slm = Repository(repos["slm"], "slm").resolve(with_spec[0])
    slm_extractor = SlmExtractor(slm, SPEC, sets=SLM_SETS)
    for variant in slm_extractor.variants():
        slm_extractor.variant(variant)
    read = {"brax": files_read([brax]), "playground": files_read([playground]), "slm": files_read([slm])}
    commits = {side: touching(repos[side], paths) for side, paths in read.items()}
    has_spec = set()
    for sha in commits["slm"]:
        if git(repos["slm"], "ls-tree", "--name-only", sha, "--", SPEC):
            has_spec.add(sha)
    commits["slm_without_spec"] = [c for c in commits["slm"] if c not in has_spec]
    commits["slm"] = [c for c in commits["slm"] if c in has_spec]
    return commits, heads, read


def summarize(outcomes: list[Outcome], commits: dict, read: dict, heads: dict, seconds: float, command: str) -> str:
    lines = ["# Extraction sweep", "",
             "Every commit, on any branch, that touches a file the extractors read, extracted with",
             "`benchmarks/sweep_extract.py` (the standing proof of issue 10: no crash, no silent",
             "absence, every unknown explained by a finding). Generated; do not edit by hand.", "",
             "```", command, "```", "",
             f"Brax commits are extracted against Playground `{heads['playground'][:12]}`, Playground commits "
             f"against Brax `{heads['brax'][:12]}` (the newest of each); SLM-Lab commits only where `{SPEC}` "
             f"exists ({len(commits.get('slm_without_spec', []))} touching commits without it are not extractable "
             "and not counted).", "",
             "| side | files read | commits | extractions | crashes | input errors | unknown keys | unexplained |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    by_side = collections.defaultdict(list)
    for outcome in outcomes:
        by_side[outcome.side].append(outcome)
    for side in ("brax", "playground", "slm"):
        items = by_side.get(side, [])
        unknown = [u for o in items for u in o.unknown]
        lines.append(f"| {side} | {len(read[side])} | {len(commits[side])} | "
                     f"{sum(o.status != 'input_error' or o.scope != '*' for o in items)} | "
                     f"{sum(o.status == 'crash' for o in items)} | {sum(o.status == 'input_error' for o in items)} | "
                     f"{len(unknown)} | {sum(not u[2] for u in unknown)} |")
    lines += ["", f"Wall time: {seconds:.0f} s.", ""]
    for side in ("brax", "playground", "slm"):
        items = by_side.get(side, [])
        causes = collections.Counter()
        keys_of = collections.defaultdict(set)
        example: dict[str, str] = {}
        for outcome in items:
            for key, cause, _ in outcome.unknown:
                causes[cause] += 1
                keys_of[cause].add(key)
                example.setdefault(cause, f"{outcome.sha[:8]} {outcome.scope}")
        lines += [f"## {side}: unknown keys by cause", ""]
        if causes:
            lines += ["| unknown keys | cause | keys | e.g. |", "| ---: | --- | --- | --- |"]
            for cause, count in sorted(causes.items(), key=lambda c: (-c[1], c[0])):
                shown = ", ".join(f"`{k}`" for k in sorted(keys_of[cause])[:8])
                more = f" (+{len(keys_of[cause]) - 8})" if len(keys_of[cause]) > 8 else ""
                lines.append(f"| {count} | {cause.replace('|', '/')} | {shown}{more} | `{example[cause]}` |")
        else:
            lines.append("None.")
        crashes = [o for o in items if o.status == "crash"]
        errors = collections.Counter(cause_of(o.detail) for o in items if o.status == "input_error")
        if crashes:
            lines += ["", "Crashes:", ""] + [f"- `{o.sha[:12]}` {o.scope}: {o.detail}" for o in crashes[:20]]
        if errors:
            lines += ["", "Input errors (a file or spec the commit does not have):", ""]
            lines += [f"- {count} x {cause}" for cause, count in sorted(errors.items(), key=lambda c: -c[1])]
        if side == "slm":
            blocked = collections.Counter()
            first: dict[str, str] = {}
            for o in items:
                if o.status == "ok" and o.blocked:
                    cause = o.blocked
                    blocked[cause] += 1
                    first.setdefault(cause, f"{o.sha[:8]} {o.scope}")
            total = sum(o.status == "ok" for o in items)
            lines += ["", f"### slm: can each variant train? {total - sum(blocked.values())} of {total} "
                          "extractions train", ""]
            if blocked:
                lines += ["| variants | why not | e.g. |", "| ---: | --- | --- |"]
                for cause, count in sorted(blocked.items(), key=lambda c: (-c[1], c[0])):
                    lines.append(f"| {count} | {cause.replace('|', '/')} | `{first[cause]}` |")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brax-repo", required=True)
    parser.add_argument("--playground-repo", required=True)
    parser.add_argument("--slm-repo", required=True)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--limit", type=int, default=0, help="at most N commits per side (0: all)")
    parser.add_argument("--markdown", help="write the summary as Markdown to this file")
    args = parser.parse_args(argv)
    repos = {"brax": args.brax_repo, "playground": args.playground_repo, "slm": args.slm_repo}
    start = time.perf_counter()
    commits, heads, read = plan(repos)
    tasks = []
    for side in ("brax", "playground", "slm"):
        chosen = commits[side][-args.limit:] if args.limit else commits[side]
        commits[side] = chosen
        tasks += [(side, sha, repos, heads) for sha in chosen]
    outcomes: list[Outcome] = []
    if args.jobs > 1:
        with multiprocessing.Pool(args.jobs) as pool:
            for index, result in enumerate(pool.imap(run_task, tasks, chunksize=4)):
                outcomes += result
                print(f"[{index + 1}/{len(tasks)}] {tasks[index][0]} {tasks[index][1][:12]}", file=sys.stderr,
                      flush=True)
    else:
        for index, task in enumerate(tasks):
            outcomes += run_task(task)
            print(f"[{index + 1}/{len(tasks)}] {task[0]} {task[1][:12]}", file=sys.stderr, flush=True)
    seconds = time.perf_counter() - start
    command = ("nice python benchmarks/sweep_extract.py --brax-repo BRAX.git --playground-repo PLAYGROUND.git "
               f"--slm-repo SLM.git --jobs {args.jobs}" + (f" --limit {args.limit}" if args.limit else "")
               + (f" --markdown {args.markdown}" if args.markdown else ""))
    text = summarize(outcomes, commits, read, heads, seconds, command)
    sys.stdout.write(text)
    if args.markdown:
        Path(args.markdown).write_text(text, encoding="utf-8")
    return 1 if any(o.status == "crash" for o in outcomes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
