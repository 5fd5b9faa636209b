"""Which attention backend vLLM runs on a GPU, and whether that backend can cascade at all.

vLLM picks the first valid backend of a priority list (vllm/platforms/cuda.py @ 002db4951e0c,
`_get_backend_priorities`): on compute capability 10.x (data-centre Blackwell: B200, B300, GB200,
GB300) FlashInfer comes first, everywhere else on CUDA FlashAttention does. MLA models get MLA
backends (FlashInfer-MLA / CUTLASS-MLA on Blackwell, FlashAttention-MLA / FlashMLA elsewhere).
Only the FlashAttention builder overrides `use_cascade_attention`; the base builder returns False
(vllm/v1/attention/backend.py @ 0014ca6b9929), so every other backend (FlashInfer, Triton, FlexAttention,
the MLA and ROCm backends) never cascades. `--attention-backend` models the user's choice
(vLLM's `--attention-backend`, or the VLLM_ATTENTION_BACKEND variable of older releases).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cascade_plan.errors import InputError
from cascade_plan.gpus import BLACKWELL, ids_of

FLASH_ATTN = "FLASH_ATTN"
FLASHINFER = "FLASHINFER"
#: The backends a user can name, in vLLM's spelling, and what each is.
VLLM_BACKENDS: dict[str, str] = {
    FLASH_ATTN: "FlashAttention (the only backend with a cascade path)",
    FLASHINFER: "FlashInfer (never cascades)",
    "TRITON_ATTN": "vLLM's Triton attention (never cascades)",
    "FLEX_ATTENTION": "FlexAttention (never cascades)",
}
#: Data-centre Blackwell parts (compute capability 10.x), by profile id; a user profile matches by name.
BLACKWELL_IDS = ids_of(BLACKWELL)
_BLACKWELL_NAME = re.compile(r"\bG?B[123]00\b|blackwell", re.IGNORECASE)


@dataclass(frozen=True)
class BackendChoice:
    name: str             # vLLM's AttentionBackendEnum name, or "MLA" / "ROCM" for those families
    chosen_by_user: bool
    why: str              # one sentence: where the choice comes from

    @property
    def can_cascade(self) -> bool:
        return self.name == FLASH_ATTN

    @property
    def label(self) -> str:
        return f"{self.name} ({'--attention-backend' if self.chosen_by_user else 'vLLM default on this GPU'})"


def parse_attention_backend(text: str | None) -> str | None:
    """A user's `--attention-backend`, in any of vLLM's spellings; None (or 'auto') for vLLM's own pick."""
    if text is None or text.strip().lower() in ("", "auto"):
        return None
    key = text.strip().upper().replace("-", "_")
    key = {"FLASHATTENTION": FLASH_ATTN, "FA": FLASH_ATTN, "FLASH_ATTENTION": FLASH_ATTN,
           "FLASH_INFER": FLASHINFER, "TRITON": "TRITON_ATTN", "FLEX": "FLEX_ATTENTION"}.get(key, key)
    if key not in VLLM_BACKENDS:
        raise InputError(f"--attention-backend: unknown backend {text!r}: use auto, "
                         + ", ".join(VLLM_BACKENDS))
    return key


def is_blackwell(hw) -> bool:
    base = hw.id.split(" ")[0].lower()          # a what-if GPU keeps its profile's id first
    return base in BLACKWELL_IDS or bool(_BLACKWELL_NAME.search(hw.name or ""))


def attention_backend(hw, mla: bool, user: str | None = None) -> BackendChoice:
    """The backend vLLM runs for this GPU and attention kind, or the user's choice (validated name)."""
    if user is not None:
        if mla:
            return BackendChoice("MLA", True, f"{user} was asked for, but MLA models run on vLLM's MLA backends, "
                                              "none of which has a cascade path.")
        return BackendChoice(user, True, f"--attention-backend {user}: {VLLM_BACKENDS[user]}.")
    if hw.vendor == "amd":
        return BackendChoice("ROCM", False, "On AMD GPUs vLLM runs its ROCm backends, none of which has a "
                                            "cascade path (only the CUDA FlashAttention builder overrides "
                                            "use_cascade_attention).")
    if mla:
        return BackendChoice("MLA", False, "MLA models run on vLLM's MLA backends, none of which has a cascade path.")
    if is_blackwell(hw):
        return BackendChoice(FLASHINFER, False, "vLLM's default on Blackwell (compute capability 10.x) is FlashInfer, "
                                                "which never cascades; --attention-backend FLASH_ATTN models a "
                                                "deployment that chose FlashAttention.")
    return BackendChoice(FLASH_ATTN, False, "vLLM's default on this GPU is FlashAttention (FlashInfer comes first "
                                            "only on Blackwell).")
