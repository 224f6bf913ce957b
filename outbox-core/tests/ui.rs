//! Compile-time behaviour of `#[derive(OutboxEvent)]`: what compiles, and the error messages of
//! what does not. Regenerate the expected output with `TRYBUILD=overwrite`, then read it.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
