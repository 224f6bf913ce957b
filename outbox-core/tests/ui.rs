//! Compile-time errors of `#[derive(OutboxEvent)]`: the messages of what does not compile (what
//! does compile is in `derive.rs`: trybuild only checks, then, rather than building). Regenerate
//! the expected output with `TRYBUILD=overwrite`, then read it.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
}
