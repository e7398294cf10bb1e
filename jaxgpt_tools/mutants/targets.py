"""Test node ids the catalogue names as a mutant's likely killers (run first, for speed)."""

RECORD_CODE = "parity_tests/test_record_code.py::test_each_framework_against_the_records_own_code"
RECORD_FORWARD = f"{RECORD_CODE}[record-forward]"
RECORD_TRAINING = f"{RECORD_CODE}[record-training]"
UNET_FORWARD = f"{RECORD_CODE}[unet-value-embeds-forward]"
SHORTCUTS_FORWARD = f"{RECORD_CODE}[shortcuts-forward]"
UNTIE_FORWARD = f"{RECORD_CODE}[untie-embed-forward]"
SOFTCAP_FORWARD = f"{RECORD_CODE}[softcap-forward]"
CAPPED = "parity_tests/test_record_code.py::test_the_capped_logits_where_the_cap_bends"
RECORD_OPTIMIZER = ("parity_tests/test_record_code_optimizer.py::"
                    "test_the_same_gradients_through_the_records_own_optimizers_and_both_frameworks")
RECORD_OPTIMIZER_20 = f"{RECORD_OPTIMIZER}[record]"
FP32_PARITY = "parity_tests/test_model_parity.py::test_fp32_logits_and_loss_match[record_like-14]"
FP32_ODD_WINDOW = "parity_tests/test_model_parity.py::test_fp32_logits_and_loss_match[one_doc-5]"  # W_short 2, not 5 // 2 + 1
BF16_PARITY = "parity_tests/test_model_parity.py::test_record_bf16_eval_logits_and_loss_match[record_like-14]"
FP8_PARITY = "parity_tests/test_model_parity.py::test_record_fp8_train_loss_matches_emulation"
GRAD_PARITY = "parity_tests/test_model_parity.py::test_fp32_parameter_gradients_match"
CONFIG_PARITY = "parity_tests/test_config_parity.py"
MASKS_PARITY = "parity_tests/test_masks_parity.py"
RECORD_MASKS = "parity_tests/test_record_masks.py"
OPTIM_PARITY = "parity_tests/test_optim_parity.py::test_optimizer_steps_match_torch_ref[1]"
# 10 steps: after one step from a zero buffer every momentum form gives a multiple of the gradient,
# which Newton-Schulz's normalisation cancels.
OPTIM_PARITY_10 = "parity_tests/test_optim_parity.py::test_optimizer_steps_match_torch_ref[10]"
NS_PARITY = "parity_tests/test_optim_parity.py::test_newton_schulz_matches_torch_ref"
SCHEDULE_PARITY = "parity_tests/test_optim_parity.py::test_schedules_equal_torch_ref_on_every_record_step"
MASKS = "tests/test_masks.py"
SCHEDULES = "tests/test_schedules.py"
CONFIG = "tests/test_config.py"
MODEL = "tests/test_model.py"
POLICY_DTYPES = (f"{MODEL}::test_policy_dtypes", f"{MODEL}::test_record_policy_dtypes_and_train_head_differs")
ROTARY_TESTS = (f"{MODEL}::test_rotary_tables", f"{MODEL}::test_rotary_sign_and_half_split_against_hand_formula")
MODEL_LINEAGE = "tests/test_model_lineage.py"
MUON = "tests/test_muon.py"
TORCH_MODEL = "tests/torch_ref/test_model.py"
# New checks written for mutants that survived the suite (each names what it kills).
SPEC_NUMBERS = "parity_tests/test_spec_numbers.py"
NS_EDGES = "parity_tests/test_newton_schulz_edges.py"
BF16_MODEL_INIT = "tests/test_bf16_model_init.py"
RMS_NORM_ROUNDING = "tests/test_rms_norm_rounding.py"
ROTARY_ROUNDING = "tests/test_rotary_rounding.py"
RECORD_BF16 = "parity_tests/test_record_code_bf16.py::test_each_framework_against_the_records_own_bf16_code"
SOFTCAP_BF16 = f"{RECORD_BF16}[softcap]"
