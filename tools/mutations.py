"""Small deliberate bugs that the test suite must catch (run by tools/mutate.py).

Each entry: name, path (from the repository root), old (a snippet that occurs exactly
once), new (the bug), args (what pytest runs: the tests that must fail on it).
"""
SUB = "submission.py"


def mutation(name, old, new, args, path=SUB):
    return {"name": name, "path": path, "old": old, "new": new, "args": args}


KERNEL = ["tests/test_kernel.py", "-k"]
CONVERSIONS = ["tests/test_conversions.py", "-k"]
FALLBACK = ["tests/test_fallback.py", "-k"]

MUTATIONS = [
    # --- each conversion: value, sign, scale exponent, byte select, special scale bytes ---
    mutation("portable: one code's sign", "half = (((code & 0x7) << 9) | ((code & 0x8) << 12))",
             "half = (((code & 0x7) << 9) | ((code & 0x8) << 12) | ((code == 3).to(tl.int32) << 15))",
             CONVERSIONS + ["portable and exact_range"]),
    mutation("portable: code value (exponent bits shifted)", "half = (((code & 0x7) << 9)",
             "half = (((code & 0x6) << 9) | ((code & 0x1) << 8)", CONVERSIONS + ["portable and exact_range"]),
    mutation("portable: scale exponent off by one", "bits = tl.where(scale_bytes == 0, 0x00400000, scale_bytes << 23)",
             "bits = tl.where(scale_bytes == 0, 0x00400000, (scale_bytes + 1) << 23)",
             CONVERSIONS + ["portable and exact_range"]),
    mutation("e8m0 255 as +inf again (the old _scale_f32)",
             "return tl.where(scale_bytes == 255, 0x7FC00000, bits).to(tl.float32, bitcast=True)",
             "return (scale_bytes << 23).to(tl.float32, bitcast=True)", CONVERSIONS + ["255 and portable"]),
    mutation("ptx: scale off by one power of two", "(scale_bytes + 62) << 7)", "(scale_bytes + 63) << 7)",
             CONVERSIONS + ["ptx and exact_range"]),
    mutation("ptx: byte 255 not NaN", "tl.where(scale_bytes == 255, 0x7FC0, (scale_bytes + 62) << 7)",
             "(scale_bytes + 62) << 7", CONVERSIONS + ["ptx and 255"]),
    mutation("ptx: value mask", '"and.b32 x, x, 0x81C081C0;"', '"and.b32 x, x, 0x81C083C0;"',
             CONVERSIONS + ["ptx and exact_range"]),
    mutation("ptx: even/odd bytes 2 and 3 swapped", '(("0x8180", "$5"), ("0x8382", "$6"))',
             '(("0x8180", "$5"), ("0x8283", "$6"))', CONVERSIONS + ["ptx and even_odd and exact_range"]),
    mutation("ptx: sign nibble (no sign replication)", 'f"0x{0x8480 + 0x101 * b:04x}"', 'f"0x{0x0400 + 0x101 * b:04x}"',
             CONVERSIONS + ["ptx and natural and exact_range"]),
    mutation("gfx950: byte select (op_sel) of the third pair", "v_cvt_scalef32_pk_bf16_fp4 $2, $4, $5 op_sel:[0,1,0]",
             "v_cvt_scalef32_pk_bf16_fp4 $2, $4, $5 op_sel:[1,0,0]", CONVERSIONS + ["gfx950 and exact_range"]),
    mutation("gfx950: scale exponent off by one", "scale = _per_block(_scale_exponent_field(scale_bytes), BLOCK_N,",
             "scale = _per_block(_scale_exponent_field(scale_bytes + 1), BLOCK_N,", CONVERSIONS + ["gfx950 and exact_range"]),
    # --- masking and tails in every loop structure ---
    mutation("split-tail loop runs one tile past its end, unmasked",
             "for tile_start in range(lo, full_end, BLOCK_N):\n            m_i, l_i, acc_a, acc_b = _tile(",
             "for tile_start in range(lo, full_end + BLOCK_N, BLOCK_N):\n            m_i, l_i, acc_a, acc_b = _tile(",
             KERNEL + ["every_variant and (natural-tail or even_odd-tail) and 300"]),
    mutation("natural tile: tail scores not masked",
             "_probe(probe_row, tile_slot + 1, scores, PROBE)\n    if MASKED:\n        scores = tl.where(rows_ok[None, :], "
             "scores, float(\"-inf\"))\n    m_i, alpha, p, l_i = _softmax_step(scores, m_i, l_i, qk_scale_log2)\n"
             "    _probe(probe_row, tile_slot + 2, l_i, PROBE)\n    acc = tl.dot(",
             "_probe(probe_row, tile_slot + 1, scores, PROBE)\n    if False:\n        scores = tl.where(rows_ok[None, :], "
             "scores, float(\"-inf\"))\n    m_i, alpha, p, l_i = _softmax_step(scores, m_i, l_i, qk_scale_log2)\n"
             "    _probe(probe_row, tile_slot + 2, l_i, PROBE)\n    acc = tl.dot(",
             KERNEL + ["every_variant and portable-natural and 129"]),
    mutation("even/odd tile: tail scores not masked",
             "scores = tl.dot(q_rope_odd, tl.trans(kr_odd), scores)\n    _probe(probe_row, tile_slot + 1, scores, PROBE)\n"
             "    if MASKED:",
             "scores = tl.dot(q_rope_odd, tl.trans(kr_odd), scores)\n    _probe(probe_row, tile_slot + 1, scores, PROBE)\n"
             "    if False:",
             KERNEL + ["every_variant and ptx-even_odd and 129"]),
    mutation("one masked loop starts past the first tile",
             "        for tile_start in range(lo, hi, BLOCK_N):\n            m_i, l_i, acc_a, acc_b = _tile(",
             "        for tile_start in range(lo + BLOCK_N, hi, BLOCK_N):\n            m_i, l_i, acc_a, acc_b = _tile(",
             KERNEL + ["every_variant and portable-natural and 64"]),
    mutation("split-tail: the tail tile skipped",
             "        if full_end < hi:\n            m_i, l_i, acc_a, acc_b = _tile(",
             "        if False:\n            m_i, l_i, acc_a, acc_b = _tile(",
             KERNEL + ["every_variant and gfx950 and 129"]),
    mutation("even/odd: Q's even and odd dims swapped", "qa, qb = tl.split(tl.reshape(q_nope,",
             "qb, qa = tl.split(tl.reshape(q_nope,", KERNEL + ["every_variant and ptx-even_odd and 64"]),
    mutation("even/odd: the result's even and odd dims swapped", "acc_a = tl.reshape(tl.join(acc_a, acc_b),",
             "acc_a = tl.reshape(tl.join(acc_b, acc_a),", KERNEL + ["every_variant and ptx-even_odd and 64"]),
    # --- the SCALED family ---
    mutation("scaled: Q block exponent one too small (saturates)", "exponent = ((bits >> 23) & 0xFF) - 127 - 8 + ((bits & 0x7FFFFF) > 0x600000).to(tl.int32)",
             "exponent = ((bits >> 23) & 0xFF) - 127 - 9 + ((bits & 0x7FFFFF) > 0x600000).to(tl.int32)",
             KERNEL + ["every_variant and scaled-portable and 129"]),
    mutation("scaled: the second rope block read with scale 1", "rope_scale_real = rope_blocks[None, :] < ROPE_C // 32\n",
             "rope_scale_real = rope_blocks[None, :] < 1\n", KERNEL + ["every_variant and scaled-portable and 129"]),
    mutation("scaled: the rope dims dropped from the scores",
             'scores = tl.dot_scaled(q8_rope, qs_rope, "e4m3", tl.trans(k_rope), k_rope_scales, "e2m1", scores)',
             "scores = scores", KERNEL + ["every_variant and scaled-portable and 129"]),
    mutation("scaled: tail scores not masked", "    scores = tl.dot_scaled(q8_rope, qs_rope, \"e4m3\", tl.trans(k_rope), k_rope_scales, \"e2m1\", scores)\n    if MASKED:",
             "    scores = tl.dot_scaled(q8_rope, qs_rope, \"e4m3\", tl.trans(k_rope), k_rope_scales, \"e2m1\", scores)\n    if False:",
             KERNEL + ["every_variant and scaled-portable and 129"]),
    mutation("scaled: the checks skip the Q quantization's bytes",
             "if not (torch.equal(written_q8, q8) and torch.equal(written_qs, qs)):", "if False:",
             ["tests/test_fallback.py", "-k", "scaled_q_quantization"]),
    mutation("scaled: split 0 does not write its Q bytes", "        if split == 0:\n            heads =",
             "        if split == -1:\n            heads =", KERNEL + ["every_variant and scaled-portable and 64"]),
    # --- the split merge ---
    mutation("merge: an invalid range no longer NaN (more than one split)",
             'norm = tl.where(invalid > 0, float("nan"), norm)', "norm = norm", KERNEL + ["invalid and 4-splits"]),
    mutation("merge: empty splits weighted as exp2(nan)",
             'm_ref = tl.where(m_new > float("-inf"), m_new, 0.0)', "m_ref = m_new", KERNEL + ["empty and 4-splits"]),
    mutation("merge: output 1% high", "(acc_run * norm[:, None]).to(tl.bfloat16)",
             "(acc_run * norm[:, None] * 1.01).to(tl.bfloat16)", KERNEL + ["every_variant and portable-natural and 300"]),
    mutation("merge: only the first chunk of splits", "for first in range(0, num_splits, CHUNK):",
             "for first in range(0, CHUNK, CHUNK):", ["tests/test_merge.py", "-k", "more_splits and combine"]),
    mutation("fused: the first program to finish merges", "finished = tl.atomic_add(count_ptr + seq, 1, sem=\"acq_rel\", "
             "scope=\"gpu\") + 1", "finished = tl.atomic_add(count_ptr + seq, 1, sem=\"acq_rel\", scope=\"gpu\")",
             ["tests/test_merge.py", "-k", "empty_and_single and fused and bf16"]),
    mutation("fused: no merge at all", "if (finished & (num_splits - 1)) == 0:", "if finished < 0:",
             ["tests/test_merge.py", "-k", "empty_and_single and fused and bf16"]),
    mutation("fused: the counters are not kept in step with the calls", "if (finished & (num_splits - 1)) == 0:",
             "if (finished & (num_splits - 1)) == 0 and finished <= num_splits:",
             ["tests/test_merge.py", "-k", "consecutive and bf16"]),
    # --- uniform output error the per-element bound lets through ---
    mutation("one-split output scaled by 1.015", "norm = tl.where(l_i > 0, value_scale / l_i, 0.0)",
             "norm = tl.where(l_i > 0, 1.015 * value_scale / l_i, 0.0)",
             KERNEL + ["matches_exact_attention_small and natural and 129"]),
    # --- self-check, fallback ---
    mutation("self-check tolerance 10x looser", "SELF_CHECK_ATOL, SELF_CHECK_RTOL = 8e-3, 2e-2",
             "SELF_CHECK_ATOL, SELF_CHECK_RTOL = 8e-2, 2e-1", FALLBACK + ["tolerance"]),
    mutation("self-check always passes", "    if bool(bad.any()):\n        return (f\"{int(bad.sum())} of",
             "    if False:\n        return (f\"{int(bad.sum())} of", FALLBACK + ["slightly_wrong"]),
    mutation("the first call's own output is not checked",
             "lambda: check_output(\n                    variant, q, packed, scales, kv_indptr, out,",
             "lambda: None and check_output(\n                    variant, q, packed, scales, kv_indptr, out,",
             FALLBACK + ["wrong_on_the_real"]),
    mutation("checks: only the first sequence of a large batch", "    return sorted({round(i * (batch - 1) / "
             "(REAL_CHECK_SEQUENCES - 1)) for i in range(REAL_CHECK_SEQUENCES)})", "    return [0]",
             ["tests/test_checks.py", "-k", "spread_sample"]),
    mutation("self-check input always 16-byte aligned", "offset = 0 if template.data_ptr() % 16 == 0 else 1",
             "offset = 0", ["tests/test_checks.py", "-k", "strides_and_alignment"]),
    mutation("no fallback: the first variant's failure is fatal",
             "_warn_once((\"failed\", variant), f\"kernel variant failed ({variant.describe()}: {why}); \"\n"
             "                                                f\"falling back to the next one\")\n                continue",
             "raise", FALLBACK + ["fails_to_build"]),
    mutation("host-side bugs swallowed by the fallback", "except (KernelLaunchError, SelfCheckError) as exc:",
             "except Exception as exc:", FALLBACK + ["host_side"]),
    mutation("a host-side TypeError becomes a fallback", "    except triton.errors.TritonError as exc:\n",
             "    except (triton.errors.TritonError, TypeError) as exc:\n", FALLBACK + ["type_error"]),
    mutation("out of memory falls back", "    except torch.OutOfMemoryError as exc:\n        raise torch.OutOfMemoryError(",
             "    except ZeroDivisionError as exc:\n        raise torch.OutOfMemoryError(", FALLBACK + ["sorted_by_kind and oom"]),
    mutation("a faulted device falls back", "        if _device_faulted(device):\n            raise RuntimeError(",
             "        if False:\n            raise RuntimeError(", FALLBACK + ["sorted_by_kind and device"]),
    mutation("a refused launch is fatal", "        raise KernelLaunchError(f\"{variant.describe()}: {type(exc).__name__}: "
             "{exc}\") from exc\n\n\nclass Scratch", "        raise\n\n\nclass Scratch",
             FALLBACK + ["sorted_by_kind and refused"]),
    mutation("fallback order reversed", "    merged = [variant._replace(", "    order = order[::-1]\n    merged = [variant._replace(",
             FALLBACK + ["fallback_order"]),
    mutation("native variant without its split-tail loop", "native in SPLIT_TAIL_CONVERTS))", "False))",
             FALLBACK + ["fallback_order"]),
    # --- launch table and dispatch ---
    mutation("launch table: an invalid tile", "(4, 1024): ('triton', 64, 4, 16, 2),", "(4, 1024): ('triton', 48, 4, 16, 2),",
             ["tests/test_dispatch.py"]),
    mutation("dispatch ignores the measured table", "choice = measured_table(device).get((batch, kv_len))",
             "choice = None", ["tests/test_dispatch.py"]),
    mutation("predicted split count not a power of two", "_pow2_floor(tiles // 2))", "max(1, tiles // 2))",
             ["tests/test_dispatch.py"]),
    # --- first-call tuning ---
    mutation("tuning: a failed candidate is timed and can win", "splitlines()[-1][:200]))\n            continue",
             "splitlines()[-1][:200]))",
             ["tests/test_first_call_tuning.py", "-k", "never_picked"]),
    mutation("tuning: an aiter failure other than NoVariantError stops the call",
             'if _fatal(exc, device) or not (choice[0] == "aiter" or isinstance(exc, NoVariantError)):',
             "if _fatal(exc, device) or not isinstance(exc, NoVariantError):",
             ["tests/test_first_call_tuning.py", "-k", "aiter_failing"]),
    mutation("tuning: a device fault is a failed candidate",
             'if _fatal(exc, device) or not (choice[0] == "aiter" or isinstance(exc, NoVariantError)):',
             'if not (choice[0] == "aiter" or isinstance(exc, NoVariantError)):',
             ["tests/test_first_call_tuning.py", "-k", "propagate_from_tuning"]),
    mutation("tuning: a candidate that fell back is ranked", "if variants and plan.variant != variants[0]:",
             "if False:", ["tests/test_first_call_tuning.py", "-k", "fell_back"]),
    mutation("report: a candidate without its family", 'return (f"{FAMILY_NAMES[launch.scores]} t{launch.block_n}',
             'return (f"t{launch.block_n}', ["tests/test_first_call_tuning.py", "-k", "scaled_from_a_bf16"]),
    mutation("report: the block loses the times", 'lines += [f"        {case!r}: {choice!r},  # {us:.1f} us"',
             'lines += [f"        {case!r}: {choice!r},"', ["tests/test_first_call_tuning.py", "-k", "block"]),
    mutation("tuning: the slowest candidate wins", 'entry["pick"] = min(measured)[1]', 'entry["pick"] = max(measured)[1]',
             ["tests/test_first_call_tuning.py", "-k", "fastest"]),
    mutation("tuning: runs even where the table has the case", "if (batch, kv_len) in measured_table(device) or (arch, batch, kv_len) in TUNED:",
             "if (arch, batch, kv_len) in TUNED:", ["tests/test_first_call_tuning.py", "-k", "table_wins"]),
    mutation("tuning: MLA_TUNE=0 ignored", 'if mode == "0" or os.environ.get("MLA_PATH") is not None:',
             'if os.environ.get("MLA_PATH") is not None:', ["tests/test_first_call_tuning.py", "-k", "table_wins"]),
    mutation("tuning: no case budget", "if spent > TUNE_CASE_TIMING_S or", "if False and spent > TUNE_CASE_TIMING_S or",
             ["tests/test_first_call_tuning.py", "-k", "budget"]),
    # --- the runner's gates ---
    mutation("gate: a disallowed module through __import__", "from task import input_t, output_t",
             "from task import input_t, output_t\n_np = __import__(\"numpy\")", ["tests/test_submission_gates.py"]),
    mutation("gate: the forbidden word in a comment", "import functools\n", "import functools  # upstream\n",
             ["tests/test_submission_gates.py"]),
]
