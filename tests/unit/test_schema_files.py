from schemas.export import CONTRACTS, OUT, rendered


def test_checked_in_json_schemas_match_the_models() -> None:
    for fname, text in rendered().items():
        path = OUT / fname
        assert path.exists(), f"run `make schemas`: {fname} missing"
        assert path.read_text() == text, f"run `make schemas`: {fname} is stale"


def test_every_contract_is_rendered_and_no_json_file_is_orphaned() -> None:
    files = rendered()
    assert len(files) == len(CONTRACTS)
    on_disk = {p.name for p in OUT.glob("*.json")}
    orphans = sorted(on_disk - set(files))
    assert not orphans, f"JSON schema files without a contract in schemas/export.py: {orphans}"


def test_envelope_schema_names_the_identity_fields() -> None:
    text = rendered()["change_envelope.v1.schema.json"]
    for field in ("envelope_id", "workspace", "source", "event_time", "acl", "structured_fields"):
        assert f'"{field}"' in text
