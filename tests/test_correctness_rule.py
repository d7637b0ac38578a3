"""The correctness rule is the runner's on every input: our utils.verbose_allclose /
utils.match_reference and reference.runner_rule against a stand-in of the runner's functions
(tests/runner_utils_standin.py, written from their description), on crafted tensors at the
edges (bf16 rounding of the tolerance, exactly at the tolerance, NaN and inf on one or both
sides, exactly 5% of the elements off) and on random ones near the tolerance.

Each crafted case also states the verdict by hand, so that a stand-in and an implementation
that agree on a wrong answer do not pass. tools/mutations_harness.py lists a deliberate bug
for each rule here.
"""
import re

import pytest
import torch

import reference
import runner_utils_standin as runner
import utils

BF16 = torch.bfloat16
RTOL = ATOL = 0.1  # the leaderboard's check_implementation
MLA_DATA = (None, None, None, None, reference.make_config(1, 1, 1))  # is_mla_case: stage 2 applies
PLAIN_DATA = ()  # not an MLA input: stage 1 alone decides
BF16_POINT_ONE = 0.10009765625  # 0.1 rounded to bf16: the tolerance 0.1 + 0.1 * 0 in bf16
NEXT_ABOVE = 0.1005859375  # the next bf16 value above it


def tensors(output, expected, dtype=BF16):
    return torch.tensor(output, dtype=torch.float32).to(dtype), torch.tensor(expected, dtype=torch.float32).to(BF16)


# name -> (output, expected, verdict): one or a few elements, stage 1 alone (not an MLA input)
STAGE_1 = {
    # 0.1 + 0.1 * 0 in bf16 is 0.10009765625: a difference of exactly that is within (not >);
    # with a float32 tolerance (0.1) it would be a mismatch
    "at-tolerance-bf16-rounds-up": ([BF16_POINT_ONE], [0.0], True),
    "just-over-tolerance": ([NEXT_ABOVE], [0.0], False),
    # 0.1 + 0.1 * 0.00196838 = 0.100197 in float32, 0.10009766 in bf16: the difference
    # 0.1001129 is over the bf16 tolerance only
    "bf16-rounds-the-tolerance-down": ([-0.09814453125], [0.0019683837890625], False),
    "nan-in-both": ([float("nan")], [float("nan")], True),
    "nan-in-output-only": ([float("nan")], [1.0], False),
    "nan-in-expected-only": ([1.0], [float("nan")], False),
    "same-infinities": ([float("inf"), -float("inf")], [float("inf"), -float("inf")], True),
    "opposite-infinities": ([float("inf")], [-float("inf")], False),
    "infinity-against-finite": ([float("inf")], [3.0], False),
    "large-values-within": ([110.0], [100.0], True),  # tolerance 0.1 + 10 -> 10.125 in bf16
    "large-values-over": ([110.5], [100.0], False),
}


def stage_2_case(size=100, far=0, nan_both=0, inf_both=0, at_tolerance=0):
    """(output, expected) bf16 of `size` elements, equal but for disjoint runs of: `far`
    elements 5 off, `nan_both` NaN on both sides, `inf_both` +inf on both sides,
    `at_tolerance` with expected 0 and output 0.1 in bf16 (close in bf16, not in float32)."""
    expected = torch.linspace(-2, 2, size).to(BF16)
    output = expected.clone()
    start = 0
    for count, edit in ((far, "far"), (nan_both, "nan"), (inf_both, "inf"), (at_tolerance, "edge")):
        run = slice(start, start + count)
        if edit == "far":
            output[run] += 5.0
        elif edit in ("nan", "inf"):
            output[run] = expected[run] = float("nan" if edit == "nan" else "inf")
        else:
            expected[run], output[run] = 0.0, BF16_POINT_ONE
        start += count
    return output, expected


# name -> (stage_2_case arguments, verdict): an MLA input, so stage 2 decides when stage 1 fails
STAGE_2 = {
    "4-of-100-off": (dict(far=4), True),
    # 5 / 100 as the runner divides (an integer tensor by numel: float32) is 0.0500000007 > 0.05
    "exactly-5-percent-off-fails": (dict(far=5), False),
    "5-of-101-off": (dict(size=101, far=5), True),
    "6-of-100-off": (dict(far=6), False),
    # torch.isclose without equal_nan: NaN on both sides is not close (stage 1 let it pass)
    "nan-in-both-counts-in-stage-2": (dict(far=3, nan_both=3), False),
    "nan-in-both-alone-passes-stage-1": (dict(nan_both=10), True),
    "same-infinity-is-close-in-stage-2": (dict(far=3, inf_both=10), True),
    # torch.isclose in bf16: 0.1 off an expected 0 is within 0.1 rounded to bf16
    "stage-2-tolerance-in-bf16": (dict(far=3, at_tolerance=4), True),
}


def runner_verdict(data, output, expected):
    return runner.match_reference(data, output, lambda _: expected, rtol=RTOL, atol=ATOL)[0]


def our_verdicts(data, output, expected):
    """utils.match_reference's verdict, and reference.runner_rule's for an MLA input."""
    verdicts = [utils.match_reference(data, output, lambda _: expected, rtol=RTOL, atol=ATOL)[0]]
    if data is MLA_DATA:
        verdicts.append(reference.runner_rule(output, expected)[0])
    return verdicts


@pytest.mark.parametrize("name", STAGE_1)
def test_stage_1_edges(name):
    output_values, expected_values, verdict = STAGE_1[name]
    output, expected = tensors(output_values, expected_values)
    assert runner.verbose_allclose(output, expected, rtol=RTOL, atol=ATOL)[0] is verdict
    assert utils.verbose_allclose(output, expected, rtol=RTOL, atol=ATOL)[0] is verdict
    assert runner_verdict(PLAIN_DATA, output, expected) is verdict
    assert our_verdicts(PLAIN_DATA, output, expected) == [verdict]


@pytest.mark.parametrize("name", STAGE_2)
def test_stage_2_edges(name):
    arguments, verdict = STAGE_2[name]
    output, expected = stage_2_case(**arguments)
    assert runner_verdict(MLA_DATA, output, expected) is verdict
    assert our_verdicts(MLA_DATA, output, expected) == [verdict, verdict]


def test_stage_2_applies_to_mla_inputs_only():
    output, expected = stage_2_case(far=4)
    assert runner_verdict(PLAIN_DATA, output, expected) is False
    assert our_verdicts(PLAIN_DATA, output, expected) == [False]
    assert utils.is_mla_case(MLA_DATA) and not utils.is_mla_case(PLAIN_DATA)
    assert not utils.is_mla_case((None,) * 4 + ({"num_heads": 16},))


def test_stage_2_rounds_the_difference_to_bf16():
    """One element, off by 0.1001129 from 0.00196838: over stage 1's bf16 tolerance
    (0.10009766), but torch.isclose in bf16 rounds the difference to 0.10009766 too: close,
    so an MLA input passes and any other input fails."""
    output, expected = tensors(*STAGE_1["bf16-rounds-the-tolerance-down"][:2])
    assert runner_verdict(MLA_DATA, output, expected) is True
    assert our_verdicts(MLA_DATA, output, expected) == [True, True]


def test_an_output_dtype_other_than_the_references():
    """The runner passes a float32 output that passes stage 1; one that fails it reaches
    torch.isclose with two dtypes, which raises there: we report a fail naming it."""
    output, expected = stage_2_case()
    assert runner_verdict(MLA_DATA, output.float(), expected) is True
    assert our_verdicts(MLA_DATA, output.float(), expected) == [True, True]
    output, expected = stage_2_case(far=1)
    with pytest.raises(RuntimeError):
        runner_verdict(MLA_DATA, output.float(), expected)
    good, message = utils.match_reference(MLA_DATA, output.float(), lambda _: expected, rtol=RTOL, atol=ATOL)
    assert not good and "isclose raises" in message


def test_shapes_that_differ_fail():
    output, expected = torch.zeros(2, dtype=BF16), torch.zeros(3, dtype=BF16)
    assert runner_verdict(MLA_DATA, output, expected) is False
    assert our_verdicts(MLA_DATA, output, expected) == [False, False]


def random_case(generator):
    """Random bf16 tensors of 64 elements: up to 15% of them near the tolerance (within
    +-10% of it, either side), and in some cases NaN / inf on one side, or the same on both."""
    size = 64
    uniform = lambda: torch.rand(size, generator=generator)  # noqa: E731
    expected = (torch.randn(size, generator=generator) * 4).to(BF16)
    output = expected.float().clone()
    near = uniform() < 0.15 * torch.rand(1, generator=generator)
    sign = torch.where(uniform() < 0.5, -1.0, 1.0)
    output[near] += (sign * (0.9 + 0.2 * uniform()) * (ATOL + RTOL * expected.float().abs()))[near]
    output = output.to(BF16)
    special_share = float(torch.randint(0, 3, (1,), generator=generator)) * 0.01
    for value in (float("nan"), float("inf"), -float("inf")):
        one_side, both_sides = uniform() < special_share, uniform() < special_share
        (output if bool(torch.rand(1, generator=generator) < 0.5) else expected)[one_side] = value
        output[both_sides] = expected[both_sides] = value
    return output, expected


def test_random_inputs_get_the_runners_verdict():
    generator = torch.Generator().manual_seed(1234)
    seen = set()
    for index in range(400):
        output, expected = random_case(generator)
        data = MLA_DATA if index % 2 else PLAIN_DATA
        stage_1 = runner.verbose_allclose(output, expected, rtol=RTOL, atol=ATOL)[0]
        assert utils.verbose_allclose(output, expected, rtol=RTOL, atol=ATOL)[0] is stage_1
        verdict = runner_verdict(data, output, expected)
        assert set(our_verdicts(data, output, expected)) == {verdict}, index
        seen.add((data is MLA_DATA, stage_1, verdict))
    # both stages decided some cases each way
    assert {(True, False, True), (True, False, False), (False, False, False), (False, True, True)} <= seen


def test_messages_stay_on_one_protocol_line():
    output, expected = stage_2_case(far=20)
    good, message = utils.match_reference(MLA_DATA, output, lambda _: expected, rtol=RTOL, atol=ATOL)
    assert not good and "\n" not in message
    assert "Number of mismatched elements: 20" in message and "ERROR at (0,): output " in message
    assert "mismatch_ratio=0.200000" in message  # stage 2's share, ours only


# Words of a failure, which a pass's message never has.
FAIL_WORDS = ("warning", "ERROR at", "mismatch", "Number of", utils.MESSAGE_SEPARATOR, "\n")


def test_a_pass_by_the_second_stage_reads_as_a_pass():
    """One line, saying pass, the stage that passed it and what it allowed: no `warning:`, no
    `ERROR at` listing, no separator (the runner's own message here is `warning:
    mismatch_ratio=0.040000`)."""
    output, expected = stage_2_case(far=4)
    good, message = utils.match_reference(MLA_DATA, output, lambda _: expected, rtol=RTOL, atol=ATOL)
    assert good and message.startswith("pass (the runner's rule, stage 2: 4.00% of the elements not "
                                       "torch.isclose at rtol=0.1, atol=0.1, at most 5% allowed"), message
    assert message.endswith("maximum error 5)"), message
    for fail_words in FAIL_WORDS:
        assert fail_words not in message, (fail_words, message)


def test_a_pass_by_the_first_stage_reads_as_a_pass():
    output, expected = stage_2_case()
    output[0] += 0.0625  # within 0.1 + 0.1 |ref|: stage 1 passes
    good, message = utils.match_reference(MLA_DATA, output, lambda _: expected, rtol=RTOL, atol=ATOL)
    assert good and message == ("pass (the runner's rule, stage 1: every element within 0.1 + 0.1|ref|; "
                                "maximum error 0.0625)"), message


def test_a_mismatch_line_names_the_output_and_the_reference():
    """`ERROR at (index): output X, reference Y`, each value the tensor's own at that index."""
    expected = torch.tensor([0.5, -0.25, 2.0, 1.0], dtype=BF16)
    output = expected.clone()
    output[1], output[2] = 0.75, -3.0
    good, lines = utils.verbose_allclose(output, expected, rtol=RTOL, atol=ATOL)
    assert not good
    assert lines[1:3] == ["ERROR at (1,): output 0.75, reference -0.25", "ERROR at (2,): output -3, reference 2"], lines
    good, lines = utils.verbose_allequal(output, expected)
    assert not good and lines[1].startswith("ERROR at (1,): output ") and ", reference " in lines[1], lines


def test_check_implementation_passes_in_one_line():
    """A pass is the stage of the runner's rule and its figures, nothing else; with verbose
    the notes follow on the same line, after "; "."""
    data = reference.generate_input(2, 1, 40, seed=8, device=torch.device("cpu"))
    expected = reference.ref_kernel(data)
    output = expected.clone()
    output.view(-1)[:8] += 1.0  # 8 elements off: the second stage passes it
    good, message = reference.check_implementation(data, output)
    assert good and re.fullmatch(r"pass \(the runner's rule, stage 2: 0\.05% of the elements not torch\.isclose "
                                 r"at rtol=0\.1, atol=0\.1, at most 5% allowed; maximum error [0-9.]+\)", message), message
    good, verbose = reference.check_implementation(data, output, verbose=True)
    assert good and verbose.startswith(message + "; for information, not checked: "), verbose
    assert "outside the leaderboard task README" in verbose, verbose
    for fail_words in FAIL_WORDS:
        assert fail_words not in verbose, (fail_words, verbose)


def test_a_failed_case_shorter_than_16_kv_tokens_says_why():
    """Exact attention on the MXFP4 cache fails the rule at 2 tokens (on every input of
    tools/short_kv_rule.py): the message says the failure need not be the kernel's and points
    at the docs; at 16 tokens and more a failure has no such excuse."""
    data = reference.generate_input(2, 1, 2, seed=5, device=torch.device("cpu"))
    good, message = reference.check_implementation(data, reference.exact_attention(data).to(BF16))
    assert not good, message
    lines = message.split(utils.MESSAGE_SEPARATOR)
    assert lines[0].startswith("Number of mismatched elements"), message
    why = next(line for line in lines if line.startswith("this case has a sequence of 2 KV tokens, fewer than 16"))
    assert "exact float32 attention" in why and "need not be the kernel's" in why, why
    assert "kvseqlen >= 16" in why and "docs/harness.md" in why, why
    data = reference.generate_input(2, 1, 16, seed=5, device=torch.device("cpu"))
    wrong = reference.ref_kernel(data)
    wrong[:, :8] += 1.0
    good, message = reference.check_implementation(data, wrong)
    assert not good and "fewer than 16" not in message, message


def test_the_shortest_sequence_decides_the_short_case_note():
    data = reference.generate_input(3, 1, 40, seed=5, kv_lens=[40, 9, 300], device=torch.device("cpu"))
    assert reference.shortest_kv_len(data) == 9
    wrong = reference.ref_kernel(data)
    wrong[:, :8] += 1.0
    good, message = reference.check_implementation(data, wrong)
    assert not good and "a sequence of 9 KV tokens, fewer than 16" in message, message


def test_check_implementation_accepts_a_float32_output_as_the_runner():
    data = reference.generate_input(2, 1, 40, seed=8, device=torch.device("cpu"))
    good, message = reference.check_implementation(data, reference.ref_kernel(data).float())
    assert good and message.startswith("pass (the runner's rule, stage 1"), message
    good, message = reference.check_implementation(data, reference.ref_kernel(data).float(), verbose=True)
    assert good and "for information: output dtype torch.float32" in message, message
