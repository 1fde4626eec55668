"""FTS5 keyword search: query sanitisation, stemming, headings, incremental updates."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.retrieval.local.fulltext import (
    MAX_CJK_PAIRS,
    MAX_QUERY_TERMS,
    FullTextIndex,
    build_match_expression,
    query_terms,
)
from api.retrieval.types import ChunkData


def data(note_id: str, index: int, content: str, heading: str = "Note > Section") -> ChunkData:
    return ChunkData(
        chunk_id=f"{note_id}:{index}",
        note_id=note_id,
        author_id="alice",
        note_version=1,
        chunk_index=index,
        heading_path=heading.split(" > "),
        section_path=heading,
        content_md=content,
        start_offset=0,
        end_offset=len(content),
    )


@pytest.fixture
def fts() -> FullTextIndex:
    index = FullTextIndex()
    index.replace_note(0, [data("n0", 0, "Running the database server with three replicas")])
    index.replace_note(1, [data("n1", 0, "Pasta recipe: boil water, add salt", "Cooking > Pasta")])
    index.replace_note(
        2,
        [
            data("n2", 0, "How to rotate the TLS certificates", "Runbook > Certificates"),
            data("n2", 1, "The word near appears here, and so does content", "Runbook > Misc"),
        ],
    )
    return index


def ids(results: list[tuple[ChunkData, float]]) -> list[str]:
    return [c.chunk_id for c, _ in results]


def assert_consistent(index: FullTextIndex) -> None:
    """FTS5's own check of the index structures: raises `sqlite3.DatabaseError` when they
    disagree."""
    index._db.execute("INSERT INTO chunks(chunks) VALUES ('integrity-check')")


def test_query_terms_drop_stopwords_duplicates_and_syntax() -> None:
    assert query_terms('How do I "rotate" the TLS certs? tls*') == ["rotate", "tls", "certs"]
    assert query_terms("the of and is") == []
    assert query_terms("") == []
    assert query_terms("  *** ::: ^^^ (( )) -- ") == []
    many = " ".join(f"word{i}" for i in range(100))
    assert len(query_terms(many)) == MAX_QUERY_TERMS


def test_match_expression_quotes_every_term() -> None:
    assert build_match_expression('NEAR(a b) content:secret OR "x') == (
        '"near" OR "b" OR "content" OR "secret" OR "x"'
    )
    assert build_match_expression("the") is None


def test_stemming_and_ranking(fts: FullTextIndex) -> None:
    results = fts.search("runs databases", 10)
    assert ids(results) == ["n0:0"]
    assert results[0][1] > 0  # higher is better


def test_headings_are_searchable(fts: FullTextIndex) -> None:
    assert ids(fts.search("cooking", 10)) == ["n1:0"]
    assert ids(fts.search("certificates runbook", 10))[0] == "n2:0"


@pytest.mark.parametrize(
    "query",
    [
        'NEAR("near" "content", 2)',
        "near*",
        "content: near",
        "Misc:near",
        '"unbalanced near',
        "(near",
        "^near",
        "near AND NOT nothing",
        "{content} : near",
        "near -content +x",
    ],
)
def test_fts_operators_are_plain_words(fts: FullTextIndex, query: str) -> None:
    # Every variant still finds the chunk containing the word "near", without raising.
    assert "n2:1" in ids(fts.search(query, 10))


@pytest.mark.parametrize("query", ["", "   ", "the and of", "* : ^ ( ) \" ' -", "AND OR NOT"])
def test_queries_without_terms_return_nothing(fts: FullTextIndex, query: str) -> None:
    assert fts.search(query, 10) == []


def test_unicode_text() -> None:
    index = FullTextIndex()
    index.replace_note(0, [data("u", 0, "नमस्ते दुनिया — 日本語テキスト — Café crème")])
    for query in ["नमस्ते", "日本語テキスト", "cafe", "CRÈME"]:
        assert ids(index.search(query, 5)) == ["u:0"], query


def test_allowed_notes_filter_applies_before_limit() -> None:
    index = FullTextIndex()
    # Note 0 has many chunks that match "alpha" strongly; note 1 has one weak match.
    index.replace_note(0, [data("n0", i, "alpha alpha alpha") for i in range(50)])
    index.replace_note(1, [data("n1", 0, "alpha and a lot of other words around it here")])
    assert ids(index.search("alpha", 1, allowed_notes=[1])) == ["n1:0"]
    assert index.search("alpha", 5, allowed_notes=[]) == []
    assert len(index.search("alpha", 5, allowed_notes=[0])) == 5


def test_replace_and_remove_are_incremental() -> None:
    index = FullTextIndex()
    index.replace_note(7, [data("n", 0, "old words here"), data("n", 1, "more old")])
    index.replace_note(7, [data("n", 0, "fresh content")])
    assert index.search("old", 10) == []
    assert ids(index.search("fresh", 10)) == ["n:0"]
    assert len(index) == 1
    assert_consistent(index)
    index.remove_note(7)
    assert index.search("fresh", 10) == [] and len(index) == 0
    assert_consistent(index)


def test_many_replacements_keep_the_index_consistent() -> None:
    index = FullTextIndex()
    for version in range(30):
        chunks = [data("n", i, f"version{version} shared text {i}") for i in range(version % 5 + 1)]
        index.replace_note(3, chunks)
    assert_consistent(index)
    assert index.search("version0", 10) == []
    assert len(index.search("version29", 10)) == 29 % 5 + 1
    assert index.memory_bytes() > 0


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_queries_never_raise(query: str) -> None:
    index = _FUZZ_INDEX
    results = index.search(query, 5)
    assert all(score > 0 for _, score in results)


_FUZZ_INDEX = FullTextIndex()
_FUZZ_INDEX.replace_note(0, [data("f", 0, "A small text about near and far things, * and ^")])


def test_column_weights_change_ranking() -> None:
    chunks = [
        data("h", 0, "nothing relevant in this body text at all", "Guide > Backups"),
        data("c", 0, "backups backups are configured nightly here", "Guide > Misc"),
    ]
    heading_first = FullTextIndex(heading_weight=20.0, content_weight=1.0)
    content_first = FullTextIndex(heading_weight=0.1, content_weight=1.0)
    for index in (heading_first, content_first):
        index.replace_notes([(0, chunks[:1]), (1, chunks[1:])])
    assert ids(heading_first.search("backups", 2))[0] == "h:0"
    assert ids(content_first.search("backups", 2))[0] == "c:0"


def test_cjk_query_runs_become_character_pairs() -> None:
    assert query_terms("東京") == ["東 京"]
    assert query_terms("東京の天気") == ["東 京", "京 の", "の 天", "天 気"]
    assert query_terms("雨 rain 서울에서") == ["雨", "rain", "서 울", "울 에", "에 서"]
    assert build_match_expression("大阪") == '"大 阪"'


def test_a_cjk_word_inside_a_sentence_is_found_and_ranked_by_its_pairs() -> None:
    """unicode61 keeps a whole CJK run as one token; indexed per character and queried by
    pairs, "東京" finds "東京の天気は晴れです"."""
    index = FullTextIndex()
    index.replace_note(0, [data("ja", 0, "東京の天気は晴れです。大阪では雨が降っています。")])
    index.replace_note(1, [data("zh", 0, "北京今天下雨，上海天气晴朗。")])
    index.replace_note(2, [data("ko", 0, "서울에서 부산까지 기차로 갑니다.")])
    index.replace_note(3, [data("mix", 0, "京都と東北の旅行")])  # 東 and 京, never 東京
    assert ids(index.search("東京", 5)) == ["ja:0"]
    assert ids(index.search("大阪", 5)) == ["ja:0"]
    assert ids(index.search("上海天气", 5)) == ["zh:0"]
    assert ids(index.search("서울", 5)) == ["ko:0"]
    assert ids(index.search("東京の天気", 5))[0] == "ja:0"
    # Rows are deleted with exactly what was indexed: replacing and removing leave the
    # FTS5 structures consistent and the old text unfindable.
    index.replace_note(0, [data("ja", 0, "名古屋は曇りです。")])
    assert_consistent(index)
    assert index.search("東京", 5) == [] and ids(index.search("名古屋", 5)) == ["ja:0"]
    index.remove_note(1)
    assert_consistent(index)
    assert index.search("上海", 5) == []


def test_a_long_cjk_question_keeps_its_last_words() -> None:
    """CJK character pairs have their own cap, apart from the 32-term one, so what a
    one-sentence Japanese question asks about at its end is still searched."""
    index = FullTextIndex()
    index.replace_note(0, [data("sapporo", 0, "札幌支店の担当者は田中さんです。")])
    index.replace_note(1, [data("other", 0, "English notes about the garden and the oven.")])
    question = (
        "来週の定例会議で話し合う予定の議題と、事前に準備しておくべき資料を教えてください。"
        "札幌支店の担当者は誰？"
    )
    assert ids(index.search(question, 5)) == ["sapporo:0"]
    assert "札 幌" in query_terms(question)
    assert query_terms("です") == ["で す"]  # a query of hiragana alone keeps its pairs
    long_run = "".join(chr(0x4E00 + i) for i in range(300))
    assert len(query_terms(long_run + " " + " ".join(f"w{i}" for i in range(50)))) == (
        MAX_CJK_PAIRS + MAX_QUERY_TERMS
    )


def test_ideographic_iteration_mark_is_part_of_the_word() -> None:
    """々 (U+3005) is inside the CJK ranges, so "様々" is one pair, not the loose terms
    様 OR 々, and a note holding only 様 (田中様) does not match."""
    index = FullTextIndex()
    index.replace_note(0, [data("various", 0, "様々な方法を試しました。")])
    index.replace_note(1, [data("mr", 0, "田中様へ請求書を送りました。")])
    assert ids(index.search("様々", 5)) == ["various:0"]


def _hiragana_index() -> FullTextIndex:
    index = FullTextIndex()
    index.replace_note(0, [data("sushi", 0, "週末は友達とすしを食べに行った。")])
    index.replace_note(1, [data("thanks", 0, "みんなにありがとうを伝えた。")])
    index.replace_note(2, [data("apple", 0, "朝ごはんにりんごを一つ食べた。")])
    index.replace_note(3, [data("shop", 0, "おいしいすしのお店を見つけた。")])
    return index


def test_a_hiragana_word_in_a_kanji_sentence_is_still_searched() -> None:
    """Words written in hiragana inside a kanji sentence stay searched (pairs of two
    hiragana are kept, not dropped as a stop list would): すし, ありがとう, りんご."""
    index = _hiragana_index()
    assert "す し" in query_terms("すしが好きです")
    assert set(ids(index.search("すしが好きです", 5))) >= {"sushi:0", "shop:0"}


def test_thanks_in_a_sentence_finds_the_note_holding_it() -> None:
    """'先生にありがとうと言いたい' kept only 先生/生に/と言/言い and missed the note with
    ありがとう."""
    assert ids(_hiragana_index().search("先生にありがとうと言いたい", 5))[:1] == ["thanks:0"]


def test_the_hiragana_subject_outranks_a_shared_verb() -> None:
    """'りんごが食べたい' (I want to eat an apple) is searched by all its pairs, its subject
    りんご's included, so the apple note outranks the sushi note that shares 食べ."""
    hits = _hiragana_index().search("りんごが食べたい", 5)
    scores = dict((c.chunk_id, s) for c, s in hits)
    assert scores["apple:0"] > 2 * scores.get("sushi:0", 0.0), scores


def test_a_kanji_suffix_does_not_hide_the_hiragana_word_before_it() -> None:
    """'おいしいすし屋' is searched by all its pairs, not only 'し 屋', so it finds
    'おいしいすしのお店'."""
    assert "shop:0" in ids(_hiragana_index().search("おいしいすし屋", 5))


@pytest.mark.parametrize(
    ("stored", "query"),
    [
        ("Ｗｉ-Ｆｉ のパスワードを変更する", "wi-fi password"),  # full-width Latin
        ("Reset the Wi-Fi password", "Ｗｉ－Ｆｉ"),  # full-width query, ASCII note
        ("ｻｰﾊﾞｰを再起動する", "サーバー"),  # half-width katakana in the note
        ("サーバーを再起動する", "ｻｰﾊﾞｰ"),  # ... or in the query
        ("Budget for ２０２６", "2026 budget"),  # full-width digits
    ],
)
def test_full_and_half_width_forms_match_their_usual_forms(stored: str, query: str) -> None:
    """Japanese input methods write Latin letters, digits and katakana in full- or
    half-width forms: 'Ｗｉ-Ｆｉ' matches 'Wi-Fi'. Text and queries are compared with
    those forms in NFKC, as Lucene's CJK width filter and ICU folding do."""
    index = FullTextIndex()
    index.replace_note(0, [data("n", 0, stored)])
    index.replace_note(1, [data("other", 0, "Unrelated text about cooking pasta")])
    assert ids(index.search(query, 5)) == ["n:0"]
    index.remove_note(0)  # contentless FTS5 deletes by the same tokens it indexed
    assert index.search(query, 5) == []
    assert_consistent(index)


@pytest.mark.parametrize(
    ("stored", "query"),
    [
        ("Intel® Core™ i7 laptop setup", "core i7"),
        ("Deploying Acme™ Cloud to staging", "acme"),
        ("Our Service℠ levels are defined here", "service levels"),
        ("Order №5 shipped yesterday", "order 5"),
    ],
)
def test_a_word_followed_by_a_compatibility_symbol_is_still_found(stored: str, query: str) -> None:
    """Only the width forms are folded: NFKC on all text would glue "™" onto its word as
    "TM" ("Core™" as "coretm"), and "core" would find nothing."""
    index = FullTextIndex()
    index.replace_note(0, [data("n", 0, stored)])
    index.replace_note(1, [data("other", 0, "Unrelated text about cooking pasta")])
    assert ids(index.search(query, 5)) == ["n:0"]
    for word in query.split():
        assert ids(index.search(word, 5)) == ["n:0"], f"{word!r} does not find {stored!r}"


def test_a_pasted_images_base64_does_not_bury_its_section() -> None:
    """BM25 divides by the text's length: a section with a 300 KB pasted image counted
    ~40 000 random base64 "words" and ranked below a section that only mentions the
    query once in passing. The payload is not indexed; replacing and removing the note
    keep the index consistent (deletion re-derives the same text)."""
    import base64
    import random

    image = base64.b64encode(random.Random(3).randbytes(225_000)).decode()
    index = FullTextIndex()
    with_image = (
        f"The kyoto museum trip, kyoto museum map:\n\n![map](data:image/png;base64,{image})"
    )
    index.replace_note(0, [data("img", 0, with_image)])
    passing = "A long shopping list: " + "bread milk eggs rice tea " * 30 + "and the museum"
    index.replace_note(1, [data("other", 0, passing)])
    assert ids(index.search("museum", 5)) == ["img:0", "other:0"]
    assert index.search(image[100:140], 5) == []  # base64 runs are no terms
    assert_consistent(index)
    index.replace_note(0, [data("img", 0, "fresh text")])
    index.remove_note(0)
    assert_consistent(index)
    assert ids(index.search("museum", 5)) == ["other:0"]
