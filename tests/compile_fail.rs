//! What must not compile: sending a typed address the wrong type, asking for the wrong reply
//! type, receiving the wrong type; asking for a link in a supervised child's options (its link
//! is its supervisor's). Each case in `tests/compile_fail/` is a small program the
//! compiler must refuse, with the error pinned in its `.stderr` file (regenerate with
//! `TRYBUILD=overwrite cargo test --test compile_fail` after a deliberate change).

#[test]
fn misuses_do_not_compile() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/compile_fail/*.rs");
}
