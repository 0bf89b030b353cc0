"""The reports' JSON schemas are generated from their typed sections (reports/typed_json.py): the
committed files are exactly the generated ones, they are valid JSON schemas, and the typed sections
refuse a document whose keys are not theirs."""

from typing import Any, Literal

import jsonschema
import pytest

from autorl_tui.reports.schema_files import DOCUMENTS, schema_path, write_schemas
from autorl_tui.reports.sections_run import Band, Cause, Outcome, RunReport
from autorl_tui.reports.typed_json import (ABSENT, Document, checked, document_schema, from_dict, key,
                                           optional, schema_text, section, to_dict)


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_the_committed_schema_is_the_generated_one(name):
    committed = schema_path(name).read_text()
    assert committed == schema_text(DOCUMENTS[name]), (
        f"reports/schemas/{name}.schema.json differs from its sections: run "
        f"`python -m autorl_tui.reports.schema_files` and commit the result")
    jsonschema.Draft202012Validator.check_schema(document_schema(DOCUMENTS[name]))


def test_write_schemas_writes_what_the_test_compares(tmp_path):
    written = write_schemas(tmp_path)
    assert sorted(p.name for p in written) == sorted(f"{n}.schema.json" for n in DOCUMENTS)
    for name in DOCUMENTS:
        assert schema_path(name, tmp_path).read_text() == schema_path(name).read_text()


@section
class Inner:
    OPEN = True
    n: int


@section
class Sample(Document):
    HEAD = {"title": "sample"}
    DEFS = {"band": (Band, "a band")}
    kind: Literal["a", "b"]
    label: str | None = key("what it is", minLength=1)
    values: list[float]
    inner: Inner | None
    by_name: dict[str, int]
    band: Band | None
    anything: Any = key(schema={"const": 1})
    note: str = optional()


def test_a_section_types_become_the_schema():
    schema = document_schema(Sample)
    props = schema["properties"]
    assert schema["title"] == "sample" and schema["additionalProperties"] is False
    assert props["kind"] == {"enum": ["a", "b"]}
    assert props["label"] == {"type": ["string", "null"], "minLength": 1, "description": "what it is"}
    assert props["values"] == {"type": "array", "items": {"type": "number"}}
    assert props["inner"] == {"type": ["object", "null"], "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert props["by_name"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert props["band"] == {"$ref": "#/$defs/band"} and schema["$defs"]["band"]["type"] == ["object", "null"]
    assert props["anything"] == {"const": 1}
    assert "note" in props and "note" not in schema["required"]


def test_sections_read_and_write_a_document_and_refuse_strange_keys():
    doc = {"kind": "a", "label": None, "values": [1.5], "inner": {"n": 2, "kept": "yes"}, "by_name": {"x": 1},
           "band": None, "anything": 1}
    typed = from_dict(Sample, doc)
    assert isinstance(typed.inner, Inner) and typed.inner.n == 2 and typed.note is ABSENT
    assert to_dict(typed) == doc            # an absent optional key stays absent; an open section keeps its extras
    assert checked(Sample, {**doc, "note": "n"})["note"] == "n"
    with pytest.raises(ValueError, match="unknown key.*labl"):
        from_dict(Sample, {**doc, "labl": "x"})
    with pytest.raises(ValueError, match="Sample.*label"):
        from_dict(Sample, {k: v for k, v in doc.items() if k != "label"})
    with pytest.raises(ValueError, match="Inner: expected an object"):
        from_dict(Sample, {**doc, "inner": [1]})


def test_the_run_reports_outcome_is_typed():
    outcome = {"baseline_score": 10.0, "best_dev_score": 20.0, "test_score": 18.0, "improvement": 8.0,
               "dev_improvement": 10.0, "best_submission_id": 1, "best_submission_seq": 1, "state": "done",
               "end_reason": None, "failure_source": None, "baseline_dev_score": 10.0,
               "held_out_band": {"n": 5, "observed": 8.0, "low": 1.0, "high": 12.0, "resamples": 1000, "seed": 0,
                                 "level": 0.95},
               "cause": {"errors": [], "stderr_tail": ["x"]}}
    typed = from_dict(Outcome, outcome)
    assert isinstance(typed.held_out_band, Band) and isinstance(typed.cause, Cause)
    assert to_dict(typed) == outcome and "imported_from" not in to_dict(typed)
    assert RunReport.HEAD["title"] == "autorl-tui run report"
