"""Tool exposure's terms: CJK text and ranking determinism (``tool_exposure.tokenize``, BM25)."""

from __future__ import annotations

import os
import random
import subprocess
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.domain.events import ToolSpec
from contextfold.projections.tool_exposure import rank_tools, select_tools, tokenize
from tests.counters import quarter


def _github_and_decoys() -> list[ToolSpec]:
    return [ToolSpec(name="github_create_issue", description="Create a new issue in a GitHub repository."),
            *(ToolSpec(name=f"{s}_post_message", description=f"Post a message to {s}.")
              for s in ("slack", "teams", "discord", "matrix"))]


def test_a_cjk_run_is_cut_from_latin_and_indexed_as_bigrams() -> None:
    """Chinese is written without spaces: "请在GitHub上创建一个issue" was two terms, neither of them
    "issue", and 请帮我取消订单 shared nothing with a tool described as 取消订单."""
    assert tokenize("请在GitHub上创建一个issue")[-1] == "issue"
    assert "请在" in tokenize("请在GitHub上创建一个issue")
    assert tokenize("取消订单") == ["取消", "消订", "订单"]
    assert tokenize("我") == ["我"]  # a lone character is a term of its own
    assert {"キャ", "セル"} <= set(tokenize("注文をキャンセルして"))  # Japanese kana too
    assert {"주문", "취소"} <= set(tokenize("주문을 취소해 주세요"))  # Korean particles glued on
    assert tokenize("ｉｓｓｕｅ") == ["issue"]  # full-width Latin is NFKC-folded


def test_a_camel_case_brand_matches_its_snake_case_tool_either_way() -> None:
    """"GitHub" in a sentence was git + hub, ``github_create_issue`` kept github: no match."""
    assert tokenize("GitHub") == ["git", "hub", "github"]
    services = ("github", "gitlab", "pagerduty", "hubspot", "bigquery", "dynamodb")
    tools = [ToolSpec(name=f"{s}_open_item", description="Open an item.") for s in services]
    for query in ("File a GitHub issue", "File a GitLab issue", "Page the on-call in PagerDuty",
                  "Add a HubSpot contact", "Run a BigQuery job", "Scan the DynamoDB table"):
        ranked = rank_tools(tools, query)
        assert ranked[0][1] > ranked[1][1], (query, ranked[:2])
    camel = [ToolSpec(name="GitHubOpenIssue", description="Open an issue."),
             ToolSpec(name="jira_open_issue", description="Open an issue.")]
    assert rank_tools(camel, "open a github issue")[0][0] == "GitHubOpenIssue"  # the other way round


def test_a_chinese_request_finds_its_tool_in_either_language() -> None:
    zh = [ToolSpec(name="cancel_order", description="取消订单"),
          ToolSpec(name="create_ticket", description="创建工单"),
          ToolSpec(name="query_order", description="查询订单状态")]
    ranked = rank_tools(zh, "请帮我取消订单")
    assert ranked[0][0] == "cancel_order" and ranked[0][1] > 0.0
    exposure = select_tools(_github_and_decoys(), query="请在GitHub上创建一个issue", budget_tokens=10_000,
                            count=quarter, max_relevant=1)
    assert exposure.names == ("github_create_issue",)


_VOCAB = ["GitHub", "github", "PagerDuty", "issues", "create", "order", "取消订单", "查询", "订单状态",
          "キャンセル", "주문을", "listBuckets", "s3", "deploy", "the", "file", "Files", "ＧｉｔＨｕｂ", "日"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=3),
                          st.lists(st.sampled_from(_VOCAB), max_size=8)), min_size=1, max_size=10),
       st.lists(st.sampled_from(_VOCAB), max_size=6), st.randoms(use_true_random=False))
def test_bm25_ranking_is_deterministic(tools: list[tuple[list[str], list[str]]], words: list[str],
                                       rnd: random.Random) -> None:
    """A build's hash depends on the ranking: the same registry and query rank the same, bit for
    bit, whatever the registry's order, the query's word order, fresh spec objects (a rebuilt
    index) or the calls made in between (the cached index)."""
    specs = [ToolSpec(name=f"t{i}_" + "_".join(name), description=" ".join(desc))
             for i, (name, desc) in enumerate(tools)]
    query = " ".join(words)
    first = rank_tools(specs, query)
    assert [n for n, _ in first] == sorted((n for n, _ in first),
                                           key=lambda n: (-dict(first)[n], n))  # best first, ties by name
    shuffled = rnd.sample(specs, len(specs))
    rank_tools(specs, "unrelated deploy")  # another query in between: the cached index is reused
    assert rank_tools(shuffled, " ".join(rnd.sample(words, len(words)))) == first
    fresh = [ToolSpec(name=s.name, description=s.description) for s in specs]
    assert rank_tools(fresh, query) == first


def test_bm25_ranking_does_not_depend_on_the_hash_seed() -> None:
    """Sets and dicts of str iterate by hash: a ranking that leaned on one would differ between
    processes, and a replayed build would not match its record."""
    script = ("from contextfold.domain.events import ToolSpec\n"
              "from contextfold.projections.tool_exposure import rank_tools\n"
              f"v = {_VOCAB!r}\n"
              "specs = [ToolSpec(name=f't{i}_' + v[i % len(v)], description=' '.join(v[i:] + v[:i][:3])) "
              "for i in range(len(v))]\n"
              "print(repr(rank_tools(specs, 'file a GitHub issue: 取消订单 キャンセル listBuckets')))\n")
    runs = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2", "3")}
    assert len(runs) == 1 and runs.pop().startswith("[(")



def test_thai_lao_khmer_and_myanmar_runs_are_indexed_as_bigrams() -> None:
    """These scripts write no spaces between words either, and their vowel signs are combining
    marks, which the word pattern split on: "กรุณาลบไฟล์นี้" (please delete this file) was the
    pieces กร, ณาลบไฟล, น, and a tool described as "ลบไฟล์" (delete file), one piece ลบไฟล,
    shared none of them."""
    assert tokenize("ลบไฟล์") == ["ลบ", "บไ", "ไฟ", "ฟล", "ล์"]  # Thai
    assert tokenize("ລຶບ") == ["ລຶ", "ຶບ"]  # Lao
    assert tokenize("លុប") == ["លុ", "ុប"]  # Khmer
    assert tokenize("ဖျက်") == ["ဖျ", "ျက", "က်"]  # Myanmar
    assert tokenize("ลบ file") == ["ลบ", "file"]  # cut from Latin as CJK is
    assert tokenize("ဖျက်။ဖတ်") == ["ဖျ", "ျက", "က်", "ဖတ", "တ်"]  # a sentence mark ends a run
    assert tokenize("លុប។អាន") == ["លុ", "ុប", "អា", "ាន"]
    for delete, read, query in (("ลบไฟล์", "อ่านไฟล์", "กรุณาลบไฟล์นี้"),
                                ("ລຶບໄຟລ໌", "ອ່ານໄຟລ໌", "ກະລຸນາລຶບໄຟລ໌ນີ້"),
                                ("លុបឯកសារ", "អានឯកសារ", "សូមលុបឯកសារនេះ"),
                                ("ဖိုင်ဖျက်ရန်", "ဖိုင်ဖတ်ရန်", "ဒီဖိုင်ကိုဖျက်ပါ")):
        tools = [ToolSpec(name="delete_file", description=delete),
                 ToolSpec(name="read_file", description=read)]
        ranked = rank_tools(tools, query)
        assert ranked[0][0] == "delete_file" and ranked[0][1] > ranked[1][1], (query, ranked)
        exposure = select_tools(tools, query=query, budget_tokens=10_000, count=quarter, max_relevant=1)
        assert exposure.names == ("delete_file",), query
