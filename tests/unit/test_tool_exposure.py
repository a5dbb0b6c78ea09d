"""Tool exposure: BM25 relevance, policy first, pinned/referenced, budget and cap."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.domain.errors import InvalidInputError
from contextfold.domain.events import ToolSpec
from contextfold.projections.tool_exposure import (
    BM25_B,
    BM25_K1,
    TOOL_OVERHEAD_TOKENS,
    canonical_tool_json,
    rank_tools,
    select_tools,
    tokenize,
    tool_tokens,
)
from tests.counters import Counter, cl100k, quarter

# ------------------------------------------------------------------ a realistic registry

# (service, tag, [(verb_object, description, params)]) — plausible tools of a large agent
# platform. Each description reads like a real MCP/OpenAI tool description.
_SERVICES: list[tuple[str, str, list[tuple[str, str, list[str]]]]] = [
    ("github", "git", [
        ("create_pull_request", "Open a pull request from a head branch into a base branch",
         ["repo", "head", "base", "title", "body"]),
        ("merge_pull_request", "Merge an approved pull request", ["repo", "number", "method"]),
        ("list_issues", "List open issues of a repository", ["repo", "labels", "state"]),
        ("create_issue", "File a new issue with a title and body", ["repo", "title", "body"]),
        ("comment_issue", "Add a comment to an issue or pull request",
         ["repo", "number", "body"]),
        ("get_file", "Read a file from a repository at a ref", ["repo", "path", "ref"]),
        ("list_branches", "List the branches of a repository", ["repo"]),
        ("create_release", "Publish a tagged release with notes", ["repo", "tag", "notes"]),
    ]),
    ("git", "git", [
        ("commit", "Record staged changes in the local repository", ["message", "amend"]),
        ("checkout_branch", "Switch the working tree to another branch", ["branch", "create"]),
        ("diff", "Show unstaged changes in the working tree", ["paths"]),
        ("push", "Push local commits to the remote", ["remote", "branch", "force"]),
        ("log", "Show the commit history", ["max_count", "path"]),
        ("stash", "Stash uncommitted changes", ["message"]),
    ]),
    ("slack", "chat", [
        ("post_message", "Post a message to a Slack channel", ["channel", "text", "thread_ts"]),
        ("list_channels", "List Slack channels the bot can see", ["limit"]),
        ("add_reaction", "React to a message with an emoji", ["channel", "ts", "emoji"]),
        ("upload_file", "Upload a file to a channel", ["channel", "file_path"]),
        ("search_messages", "Search Slack message history", ["query", "count"]),
    ]),
    ("gmail", "email", [
        ("send_email", "Send an email to recipients", ["to", "subject", "body", "cc"]),
        ("search_inbox", "Search the inbox with Gmail query syntax", ["query", "max_results"]),
        ("read_email", "Read one email by its message id", ["message_id"]),
        ("create_draft", "Save a draft email", ["to", "subject", "body"]),
        ("add_label", "Label an email thread", ["thread_id", "label"]),
    ]),
    ("calendar", "calendar", [
        ("create_event", "Schedule a calendar event with attendees",
         ["title", "start", "end", "attendees"]),
        ("list_events", "List events in a time range", ["start", "end"]),
        ("delete_event", "Cancel a calendar event", ["event_id"]),
        ("find_free_slot", "Find a free time slot shared by attendees",
         ["attendees", "duration_minutes"]),
    ]),
    ("aws", "cloud", [
        ("s3_list_buckets", "List S3 buckets in the account", []),
        ("s3_put_object", "Upload an object to an S3 bucket", ["bucket", "key", "body"]),
        ("s3_get_object", "Download an object from an S3 bucket", ["bucket", "key"]),
        ("ec2_describe_instances", "Describe EC2 virtual machine instances",
         ["filters", "region"]),
        ("ec2_stop_instance", "Stop a running EC2 instance", ["instance_id"]),
        ("lambda_invoke", "Invoke a Lambda function with a payload",
         ["function_name", "payload"]),
        ("cloudwatch_get_metrics", "Query CloudWatch metrics", ["namespace", "metric", "period"]),
        ("iam_list_roles", "List IAM roles", ["path_prefix"]),
    ]),
    ("gcp", "cloud", [
        ("gcs_list_objects", "List objects in a Cloud Storage bucket", ["bucket", "prefix"]),
        ("compute_list_vms", "List Compute Engine virtual machines", ["zone"]),
        ("bigquery_run_query", "Run a BigQuery SQL query", ["sql", "dataset"]),
        ("pubsub_publish", "Publish a message to a Pub/Sub topic", ["topic", "data"]),
    ]),
    ("k8s", "cloud", [
        ("get_pods", "List pods in a Kubernetes namespace", ["namespace", "selector"]),
        ("get_logs", "Fetch container logs of a pod", ["pod", "container", "tail"]),
        ("scale_deployment", "Scale a deployment to a replica count",
         ["deployment", "replicas"]),
        ("rollout_restart", "Restart a deployment's pods", ["deployment"]),
        ("apply_manifest", "Apply a YAML manifest", ["manifest"]),
    ]),
    ("postgres", "db", [
        ("run_query", "Run a read-only SQL query on PostgreSQL", ["sql", "params"]),
        ("list_tables", "List tables of a schema", ["schema"]),
        ("describe_table", "Show columns and indexes of a table", ["table"]),
        ("explain_query", "Show the query plan of a SQL statement", ["sql"]),
    ]),
    ("redis", "db", [
        ("get_key", "Read a Redis key", ["key"]),
        ("set_key", "Write a Redis key with optional TTL", ["key", "value", "ttl"]),
        ("flush_db", "Delete every key of the current Redis database", []),
    ]),
    ("mongo", "db", [
        ("find_documents", "Find MongoDB documents matching a filter",
         ["collection", "filter", "limit"]),
        ("insert_document", "Insert a document into a collection", ["collection", "document"]),
    ]),
    ("fs", "files", [
        ("read_file", "Read a text file from the workspace", ["path", "offset", "limit"]),
        ("write_file", "Write a text file in the workspace", ["path", "content"]),
        ("list_directory", "List entries of a directory", ["path"]),
        ("search_files", "Search file contents with a regular expression", ["pattern", "glob"]),
        ("move_file", "Move or rename a file", ["source", "destination"]),
        ("delete_file", "Delete a file", ["path"]),
    ]),
    ("ci", "ci", [
        ("trigger_pipeline", "Start a CI pipeline on a branch", ["project", "branch"]),
        ("get_pipeline_status", "Get the status of a CI pipeline run", ["pipeline_id"]),
        ("retry_job", "Retry a failed CI job", ["job_id"]),
        ("download_artifact", "Download a build artifact of a job", ["job_id", "name"]),
        ("list_failed_tests", "List tests that failed in a CI run", ["pipeline_id"]),
    ]),
    ("jira", "tickets", [
        ("create_ticket", "Create a Jira ticket", ["project", "summary", "description"]),
        ("transition_ticket", "Move a Jira ticket to another status", ["key", "status"]),
        ("search_tickets", "Search tickets with JQL", ["jql"]),
    ]),
    ("pagerduty", "oncall", [
        ("acknowledge_incident", "Acknowledge a PagerDuty incident", ["incident_id"]),
        ("list_oncall", "Who is on call for a schedule", ["schedule_id"]),
    ]),
    ("stripe", "payments", [
        ("create_refund", "Refund a charge", ["charge_id", "amount"]),
        ("list_invoices", "List invoices of a customer", ["customer_id"]),
    ]),
]
# More SaaS services with CRUD tools over their resources: distinct tools that compete for
# common words ("message", "file", "issue", "deploy") the way a real registry's do.
_CRUD_SERVICES: list[tuple[str, str, list[str]]] = [
    ("notion", "docs", ["page", "database", "block"]),
    ("salesforce", "crm", ["lead", "opportunity", "account"]),
    ("zendesk", "support", ["ticket", "macro"]),
    ("shopify", "ecommerce", ["order", "product", "customer"]),
    ("twilio", "sms", ["message", "call"]),
    ("datadog", "monitoring", ["monitor", "dashboard", "event"]),
    ("sentry", "monitoring", ["issue", "release"]),
    ("hubspot", "crm", ["contact", "deal"]),
    ("dropbox", "files", ["file", "folder"]),
    ("figma", "design", ["file", "comment"]),
    ("linear", "tickets", ["issue", "project"]),
    ("vercel", "deploy", ["deployment", "domain"]),
    ("terraform", "cloud", ["plan", "workspace"]),
    ("docker", "containers", ["image", "container"]),
    ("confluence", "docs", ["page", "space"]),
    ("spotify", "media", ["playlist", "track"]),
    ("youtube", "media", ["video", "comment"]),
    ("airtable", "db", ["record", "table"]),
    ("okta", "identity", ["user", "group"]),
    ("cloudflare", "cloud", ["dns_record", "zone"]),
]
_CRUD = [
    ("list", "List {r}s in {S}", ["limit", "cursor"]),
    ("get", "Get one {S} {r} by id", ["id"]),
    ("create", "Create a {S} {r}", ["fields"]),
    ("update", "Update fields of a {S} {r}", ["id", "fields"]),
    ("delete", "Delete a {S} {r}", ["id"]),
]


def _spec(name: str, description: str, params: list[str], tags: tuple[str, ...]) -> ToolSpec:
    return ToolSpec(
        name=name, description=description, tags=tags,
        parameters={"type": "object",
                    "properties": {p: {"type": "string", "description": p.replace("_", " ")}
                                   for p in params},
                    "required": params[:1]},
    )


def registry(size: int = 200) -> list[ToolSpec]:
    """``size`` distinct tools: the hand-written catalogue, then CRUD tools of more services."""
    tools = [_spec(f"{svc}_{op}", desc, params, (tag, svc))
             for svc, tag, ops in _SERVICES for op, desc, params in ops]
    for svc, tag, resources in _CRUD_SERVICES:
        for resource in resources:
            for verb, template, params in _CRUD:
                r = resource.replace("_", " ")
                desc = template.format(r=r, S=svc.capitalize())
                tools.append(_spec(f"{svc}_{verb}_{resource}", desc, params, (tag, svc)))
    assert len(tools) >= size
    return tools[:size]


TOOLS = registry()
NAMES = [t.name for t in TOOLS]


def test_registry_is_200_distinct_tools() -> None:
    assert len(TOOLS) == 200 and len(set(NAMES)) == 200


@pytest.mark.parametrize(("query", "needed"), [
    ("Fetch the logs of the crashing pod and restart the deployment",
     {"k8s_get_logs", "k8s_rollout_restart"}),
    ("Which tests failed in CI pipeline 4411? Read the file tests/test_api.py",
     {"ci_list_failed_tests", "fs_read_file"}),
    ("Refund the duplicate charge ch_123 and create a Zendesk ticket for the customer",
     {"stripe_create_refund", "zendesk_create_ticket"}),
])
def test_other_two_tool_tasks_expose_both_in_at_most_ten(query: str, needed: set[str]) -> None:
    exposure = select_tools(TOOLS, query=query, budget_tokens=4000, count=cl100k)
    assert needed <= set(exposure.names) and len(exposure.names) <= 10


@pytest.mark.parametrize("count", [quarter, cl100k], ids=["quarter", "cl100k"])
def test_two_needed_tools_out_of_200_are_exposed_in_a_lean_subset(count: Counter) -> None:
    query = ("Open a pull request for branch fix-login into main, then post a message "
             "to the #deploys Slack channel with the PR link")
    exposure = select_tools(TOOLS, query=query, budget_tokens=4000, count=count)
    names = exposure.names
    assert "github_create_pull_request" in names and "slack_post_message" in names
    assert len(names) <= 10
    assert list(names) == sorted(names)
    assert exposure.tokens == sum(t.tokens for t in exposure.exposed) <= 4000
    assert len(exposure.exposed) + len(exposure.excluded) == 200
    everything = sum(tool_tokens(t, count) for t in TOOLS)
    assert exposure.tokens < everything / 10  # lean: a small fraction of the full registry
    ranked = [n for n, _ in rank_tools(TOOLS, query)]
    assert set(ranked[:2]) == {"github_create_pull_request", "slack_post_message"}


def test_tokenize_splits_snake_camel_kebab_and_folds_plurals() -> None:
    assert tokenize("getHTTPResponse") == ["http", "response", "gethttp", "httpresponse"]  # parts, pairs
    assert tokenize("s3.listBuckets kube-ctl git_commit") == [
        "s3", "list", "bucket", "listbucket", "kube", "ctl", "git", "commit"]
    assert tokenize("Send the emails to the categories") == ["send", "email", "category"]


def test_bm25_matches_the_formula_on_a_small_corpus() -> None:
    tools = [ToolSpec(name="alpha", description="deploy service"),
             ToolSpec(name="beta", description="deploy deploy"),
             ToolSpec(name="gamma", description="weather")]
    scores = dict(rank_tools(tools, "deploy"))
    # documents: name twice + description terms
    lengths = {"alpha": 4, "beta": 4, "gamma": 3}
    avgdl = sum(lengths.values()) / 3
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))

    def bm25(tf: int, dl: int) -> float:
        return idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * dl / avgdl))

    assert scores["alpha"] == pytest.approx(bm25(1, 4))
    assert scores["beta"] == pytest.approx(bm25(2, 4))
    assert scores["gamma"] == 0.0
    assert [n for n, _ in rank_tools(tools, "deploy")] == ["beta", "alpha", "gamma"]


def test_canonical_tool_json_is_sorted_compact_and_keeps_unicode() -> None:
    a = ToolSpec(name="météo", description="Prévisions ☀",
                 parameters={"type": "object", "properties": {"b": {}, "a": {}}})
    b = ToolSpec(name="météo", description="Prévisions ☀",
                 parameters={"properties": {"a": {}, "b": {}}, "type": "object"})
    text = canonical_tool_json(a)
    assert text == canonical_tool_json(b)
    assert ": " not in text and ", " not in text and "☀" in text
    assert json.loads(text) == a.model_dump(mode="json")
    assert tool_tokens(a, quarter) == quarter(text) + TOOL_OVERHEAD_TOKENS


def test_pinned_and_referenced_are_exposed_past_cap_and_budget() -> None:
    referenced = ["redis_flush_db", "stripe_create_refund", "git_stash"]
    exposure = select_tools(TOOLS, query="weather forecast", pinned=["fs_read_file"],
                            referenced=referenced, budget_tokens=50, count=quarter,
                            max_relevant=0)
    reasons = {t.name: t.reason for t in exposure.exposed}
    assert reasons == {"fs_read_file": "pinned", **dict.fromkeys(referenced, "referenced")}
    assert exposure.over_budget and exposure.tokens > 50


def test_relevance_respects_budget_cap_and_zero_scores() -> None:
    exposure = select_tools(TOOLS, query="list s3 buckets", budget_tokens=10_000,
                            count=quarter, max_relevant=3)
    relevant = [t for t in exposure.exposed if t.reason == "relevant"]
    assert len(relevant) == 3 and all(t.score > 0 for t in relevant)
    reasons = {t.name: t.reason for t in exposure.excluded}
    assert reasons["calendar_create_event"] == "irrelevant"
    assert "over_cap" in reasons.values()
    cheapest = min(tool_tokens(t, quarter) for t in TOOLS)
    tight = select_tools(TOOLS, query="list s3 buckets", budget_tokens=cheapest - 1,
                         count=quarter)
    assert tight.exposed == () and "over_budget" in {t.reason for t in tight.excluded}
    # nothing matches: the cap is filled in registration order (rule 7), never left empty
    nothing = select_tools(TOOLS, query="zebra quantum", budget_tokens=10_000, count=quarter)
    assert set(nothing.names) == {t.name for t in TOOLS[:8]}
    assert {t.reason for t in nothing.exposed} == {"fallback"}


def test_unknown_pinned_or_referenced_name_is_reported_not_invented() -> None:
    exposure = select_tools(TOOLS, query="", referenced=["legacy_tool"], budget_tokens=100,
                            count=quarter)
    assert "legacy_tool" not in exposure.names and {t.reason for t in exposure.exposed} <= {"fallback"}
    assert [(t.name, t.reason) for t in exposure.excluded if t.name == "legacy_tool"] == [
        ("legacy_tool", "not_registered")]


def test_allowed_list_limits_exposure() -> None:
    allowed = {"gmail_send_email", "calendar_create_event"}
    exposure = select_tools(TOOLS, query="send an email and open a pull request",
                            allowed=allowed, pinned=["github_create_pull_request"],
                            budget_tokens=10_000, count=quarter)
    assert set(exposure.names) <= allowed and "gmail_send_email" in exposure.names
    excluded = {t.name: t.reason for t in exposure.excluded}
    assert excluded["github_create_pull_request"] == "not_allowed"


def test_negative_budget_is_a_typed_error() -> None:
    with pytest.raises(InvalidInputError):
        select_tools(TOOLS, query="x", budget_tokens=-1, count=quarter)


names = st.sampled_from(NAMES)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(denied=st.sets(names, max_size=10), pinned=st.sets(names, max_size=5),
       referenced=st.sets(names, max_size=5), extra=st.lists(names, max_size=5),
       allowed=st.none() | st.sets(names, min_size=1, max_size=60),
       budget=st.integers(0, 3000), cap=st.integers(0, 12),
       words=st.lists(st.sampled_from(["deploy", "email", "pull request", "bucket", "sql",
                                       "calendar", "logs", "failed tests"]), max_size=4))
def test_policy_is_never_overridden(denied: set[str], pinned: set[str], referenced: set[str],
                                    extra: list[str], allowed: set[str] | None, budget: int,
                                    cap: int, words: list[str]) -> None:
    # the query names denied tools outright, pins and references include them too
    query = " ".join([*words, *sorted(denied), *extra])
    args: dict[str, Any] = dict(query=query, pinned=pinned | denied,
                                referenced=referenced | denied, allowed=allowed, denied=denied,
                                budget_tokens=budget, count=quarter, max_relevant=cap)
    exposure = select_tools(TOOLS, **args)
    exposed = set(exposure.names)
    assert not exposed & denied
    if allowed is not None:
        assert exposed <= allowed
    # every permitted pinned/referenced tool is there, whatever the budget
    permitted = {n for n in pinned | referenced
                 if n not in denied and (allowed is None or n in allowed)}
    assert permitted <= exposed
    relevant = [t for t in exposure.exposed if t.reason == "relevant"]
    assert len(relevant) <= cap and all(t.score > 0 for t in relevant)
    mandatory_tokens = sum(t.tokens for t in exposure.exposed if t.reason != "relevant")
    assert exposure.over_budget == (mandatory_tokens > budget)
    if not exposure.over_budget:
        assert exposure.tokens <= budget
    assert {t.name for t in exposure.excluded} | exposed == set(NAMES)
    assert select_tools(TOOLS, **args) == exposure  # deterministic


def _reference_bm25(specs: list[ToolSpec], query: str) -> dict[str, float]:
    """Okapi BM25 as documented: every (tool, sorted query term) pair, no index."""
    from collections import Counter

    from contextfold.projections.tool_exposure import BM25_B, BM25_K1, tokenize
    from contextfold.projections.tool_terms import tool_document

    docs = {spec.name: Counter(tool_document(spec)) for spec in specs}
    n = len(docs)
    lengths = {name: sum(tf.values()) for name, tf in docs.items()}
    avgdl = sum(lengths.values()) / n or 1.0
    terms = sorted(set(tokenize(query)))
    df = {t: sum(1 for tf in docs.values() if t in tf) for t in terms}
    idf = {t: math.log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    out: dict[str, float] = {}
    for name, tf in docs.items():
        norm = BM25_K1 * (1.0 - BM25_B + BM25_B * lengths[name] / avgdl)
        score = 0.0
        for t in terms:
            f = tf.get(t, 0)
            if f:
                score += idf[t] * f * (BM25_K1 + 1.0) / (f + norm)
        out[name] = score
    return out


_WORDS = ["get", "user", "details", "flight", "book", "reservation", "cancel", "update", "search", "direct",
          "baggage", "payment", "list", "airports", "calculate", "think", "transfer", "agent", "id", "date"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3),
                          st.lists(st.sampled_from(_WORDS), max_size=12)), min_size=1, max_size=12),
       st.lists(st.lists(st.sampled_from(_WORDS), max_size=8), min_size=1, max_size=4))
def test_indexed_bm25_equals_the_pairwise_reference(tools: list[tuple[list[str], list[str]]],
                                                     queries: list[list[str]]) -> None:
    """Bit-for-bit: the same floats added in the same order (a build's hash depends on them)."""
    from contextfold.projections.tool_exposure import rank_tools

    specs = [ToolSpec(name="_".join(name) + f"_{i}", description=" ".join(desc)) for i, (name, desc)
             in enumerate(tools)]
    for words in queries:  # one registry, several queries: the cached index is reused
        query = " ".join(words)
        ref = _reference_bm25(specs, query)
        assert dict(rank_tools(specs, query)) == ref
        assert [n for n, _ in rank_tools(specs, query)] == sorted(ref, key=lambda k: (-ref[k], k))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([*_WORDS, "pull", "request", "slack", "message", "file", "pod", "logs"]),
                max_size=10),
       st.sets(st.sampled_from(NAMES[:60]), max_size=3), st.sets(st.sampled_from(NAMES[:60]), max_size=3),
       st.one_of(st.none(), st.sets(st.sampled_from(NAMES[:60]), max_size=40)),
       st.sets(st.sampled_from(NAMES[:60]), max_size=5), st.integers(0, 3000), st.integers(0, 12))
def test_exposure_without_the_excluded_report_is_the_same(
        words: list[str], pinned: set[str], referenced: set[str], allowed: set[str] | None,
        denied: set[str], budget: int, cap: int) -> None:
    """A build asks only for the exposed tools (``report_excluded=False``: the others are neither
    priced nor reported); what it gets equals the full answer's exposed part."""
    from contextfold.projections.tool_exposure import choose_tools, rankable

    args: dict[str, Any] = dict(query=" ".join(words), pinned=pinned, referenced=referenced, allowed=allowed,
                                denied=denied, budget_tokens=budget, count=quarter, max_relevant=cap)
    full = choose_tools(TOOLS[:60], **args)
    lean = choose_tools(TOOLS[:60], report_excluded=False, **args)
    assert lean[0] == full[0] and lean[2:] == full[2:] and lean[1] == []
    assert {t.name for t in full[0]} | {t.name for t in full[1]} == set(NAMES[:60]) | pinned | referenced
    if not rankable(NAMES[:60], pinned=pinned, referenced=referenced, allowed=allowed, denied=denied):
        unranked = choose_tools(TOOLS[:60], report_excluded=False, **{**args, "query": ""})
        assert [(t.name, t.reason) for t in unranked[0]] == [(t.name, t.reason) for t in full[0]]


def test_a_toolkit_within_the_cap_is_exposed_whole_scored_tools_first() -> None:
    """A coding agent's three tools share no word with "Login is broken, fix it": the request
    declared none of them, and the model could not act (rule 6 of the module docstring)."""
    kit = [ToolSpec(name="read_file", description="Read a file of the repository"),
           ToolSpec(name="edit_file", description="Replace text in a file"),
           ToolSpec(name="bash", description="Run a shell command")]
    exposure = select_tools(kit, query="Login is broken for everyone. Please fix it.",
                            budget_tokens=10_000, count=quarter, max_relevant=3)
    assert {(t.name, t.reason) for t in exposure.exposed} == {
        ("read_file", "toolkit"), ("edit_file", "toolkit"), ("bash", "toolkit")}
    scored = select_tools(kit, query="run the shell", budget_tokens=10_000, count=quarter, max_relevant=3)
    assert {t.name: t.reason for t in scored.exposed}["bash"] == "relevant"
    cheapest = tool_tokens(kit[2], quarter)  # room for one: the relevant one comes first
    tight = select_tools(kit, query="run the shell", budget_tokens=cheapest, count=quarter, max_relevant=3)
    assert tight.names == ("bash",)
    # one tool more than the cap: a catalogue to retrieve from; nothing matches, so the first
    # registered fill the cap (rule 7): the request still declares tools the model can act with
    over = select_tools(kit, query="Login is broken", budget_tokens=10_000, count=quarter, max_relevant=2)
    assert [(t.name, t.reason) for t in over.exposed] == [("edit_file", "fallback"),
                                                          ("read_file", "fallback")]
    assert [(t.name, t.reason) for t in over.excluded] == [("bash", "irrelevant")]
    one = select_tools(kit, query="run the shell", budget_tokens=10_000, count=quarter, max_relevant=2)
    assert one.names == ("bash",)  # one match is the retrieval's answer: not padded
    denied = select_tools(kit, query="Login is broken", denied=["bash"], budget_tokens=10_000, count=quarter,
                          max_relevant=2)  # the permitted toolkit is two
    assert denied.names == ("edit_file", "read_file")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([*_WORDS, "pull", "request", "slack", "message", "file", "pod", "logs"]),
                max_size=6),
       st.dictionaries(st.sampled_from(NAMES[:60]), st.integers(1, 9), max_size=10),
       st.sets(st.sampled_from(NAMES[:60]), max_size=3), st.sets(st.sampled_from(NAMES[:60]), max_size=3),
       st.one_of(st.none(), st.sets(st.sampled_from(NAMES[:60]), max_size=40)),
       st.sets(st.sampled_from(NAMES[:60]), max_size=5), st.integers(0, 3000), st.integers(0, 12))
def test_recent_tools_fill_only_spare_slots_most_recent_first(
        words: list[str], recent: dict[str, int], pinned: set[str], referenced: set[str],
        allowed: set[str] | None, denied: set[str], budget: int, cap: int) -> None:
    """Rule 5: a tool relevant to an earlier input fills a slot the current query left, the most
    recent first; never past the policy or the cap, never before a tool relevant now; the
    fallback only when no earlier input matched a permitted tool that is not pinned; the lean
    answer (``report_excluded=False``) is the full one's exposed part; deterministic."""
    from contextfold.projections.tool_exposure import choose_tools, permitted

    args: dict[str, Any] = dict(query=" ".join(words), pinned=pinned, referenced=referenced, allowed=allowed,
                                denied=denied, budget_tokens=budget, count=quarter, max_relevant=cap,
                                recent=recent)
    full = choose_tools(TOOLS[:60], **args)
    assert choose_tools(TOOLS[:60], report_excluded=False, **args)[0] == full[0]
    assert choose_tools(TOOLS[:60], **args) == full
    exposed, excluded = {t.name: t for t in full[0]}, {t.name: t for t in full[1]}
    assert not exposed.keys() & denied and (allowed is None or exposed.keys() <= allowed)
    slots = [t for t in full[0] if t.reason in ("relevant", "recent", "fallback")]
    assert len(slots) <= cap
    shown = [t for t in full[0] if t.reason == "recent"]
    assert all(t.score == 0.0 and t.turn == recent[t.name] for t in shown)
    if shown:  # every tool relevant now came first: none was left out for the cap
        assert not [t for t in full[1] if t.score > 0.0 and t.reason == "over_cap"]
        newest_left = max((t.turn or 0 for t in full[1] if t.turn is not None and t.reason == "over_cap"),
                          default=0)
        assert min(t.turn or 0 for t in shown) >= newest_left  # LRU: the oldest leave first
    for name, turn in recent.items():  # each one decided, with its turn when rule 5 decided it
        if name in excluded and excluded[name].reason == "over_cap" and excluded[name].score == 0.0:
            assert excluded[name].turn == turn
    matched = [n for n in recent if n not in pinned and permitted(n, allowed, denied)]
    if matched:
        assert not any(t.reason == "fallback" for t in full[0])
    if not recent:  # no earlier input: exactly the answer without rule 5
        args.pop("recent")
        assert choose_tools(TOOLS[:60], **args) == full
