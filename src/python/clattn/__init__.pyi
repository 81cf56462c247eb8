# The clattn package's public types, for type checkers (the code: __init__.py and the C module _clattn).
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, TypeVar, Union

Tensor = TypeVar("Tensor")  # a numpy.ndarray or a torch.Tensor: the output is of the query's kind

__version__: str

class Error(RuntimeError):
    status: int
    status_name: str

class ArgumentError(ValueError, RuntimeError): ...

class CallTimeoutError(Error, TimeoutError): ...

class ContextBusyError(Error):
    status: None  # type: ignore[assignment]
    status_name: None  # type: ignore[assignment]

class Context:
    def __init__(self, device: Optional[str] = ...) -> None: ...
    @property
    def device_name(self) -> str: ...
    def finish(self) -> None: ...

def default_context() -> Context: ...
def set_default_context(context: Optional[Context]) -> None: ...
def devices() -> List[Dict[str, str]]: ...
def scaled_dot_product_attention(
    query: Tensor, key: Any, value: Any, attn_mask: Any = ..., dropout_p: float = ..., is_causal: bool = ...,
    scale: Optional[float] = ..., enable_gqa: bool = ..., *, window: Optional[Tuple[Optional[int], Optional[int]]] = ...,
    softcap: Optional[float] = ..., sinks: Optional[Sequence[float]] = ..., alibi: Optional[Sequence[float]] = ...,
    offsets: Optional[Sequence[int]] = ..., key_lengths: Optional[Sequence[int]] = ...,
    logit_scale: Optional[Sequence[float]] = ..., return_lse: bool = ...,
    weights: Optional[str] = ..., algorithm: str = ..., mods: Optional[str] = ...,
    aux: Optional[Mapping[str, Any]] = ..., defines: Union[Mapping[str, Any], Sequence[str], None] = ...,
    dtype: Optional[str] = ..., context: Optional[Context] = ..., timeout: Optional[float] = ...,
    reproducible: bool = ...,
) -> Union[Tensor, Tuple[Tensor, ...]]: ...
def multi_head_attention(
    x: Tensor, w_q: Any, w_k: Any, w_v: Any, w_o: Any = ..., b_q: Any = ..., b_k: Any = ..., b_v: Any = ...,
    b_o: Any = ..., *, heads: int, kv_heads: Optional[int] = ..., kv: Any = ..., qk_dim: Optional[int] = ...,
    attn_mask: Any = ..., is_causal: bool = ..., scale: Optional[float] = ...,
    window: Optional[Tuple[Optional[int], Optional[int]]] = ..., softcap: Optional[float] = ...,
    sinks: Optional[Sequence[float]] = ..., alibi: Optional[Sequence[float]] = ...,
    key_lengths: Optional[Sequence[int]] = ..., logit_scale: Optional[Sequence[float]] = ..., algorithm: str = ...,
    mods: Optional[str] = ...,
    aux: Optional[Mapping[str, Any]] = ..., defines: Union[Mapping[str, Any], Sequence[str], None] = ...,
    dtype: Optional[str] = ..., context: Optional[Context] = ..., timeout: Optional[float] = ...,
    reproducible: bool = ...,
) -> Tensor: ...
def merge(outputs: Sequence[Tensor], lses: Sequence[Any], *, sinks: Optional[Sequence[float]] = ...,
          context: Optional[Context] = ..., timeout: Optional[float] = ...) -> Tuple[Tensor, Tensor]: ...
def sparse_attention(
    query: Tensor, key: Any, value: Any, indices: Any, *, scale: Optional[float] = ..., softcap: Optional[float] = ...,
    sinks: Optional[Sequence[float]] = ..., key_lengths: Optional[Sequence[int]] = ..., return_lse: bool = ...,
    context: Optional[Context] = ...,
) -> Union[Tensor, Tuple[Tensor, Tensor]]: ...
def wait_abandoned(context: Optional[Context] = ..., timeout: Optional[float] = ...) -> bool: ...

def register_torch_ops() -> Any: ...

class TranslationError(ValueError): ...

class BlockMask:
    mask_mod: Callable[..., Any]
    shape: Tuple[Optional[int], Optional[int], int, int]
    BLOCK_SIZE: Tuple[int, int]
    @property
    def seq_lengths(self) -> Tuple[int, int]: ...
    def counts(self) -> Optional[Tuple[int, int, int]]: ...

def create_block_mask(mask_mod: Callable[..., Any], B: Optional[int], H: Optional[int], Q_LEN: int, KV_LEN: int,
                      device: Any = ..., BLOCK_SIZE: Union[int, Tuple[int, int]] = ..., _compile: bool = ...) -> BlockMask: ...
def flex_attention(query: Tensor, key: Tensor, value: Tensor, score_mod: Optional[Callable[..., Any]] = ...,
                   block_mask: Any = ..., scale: Optional[float] = ..., enable_gqa: bool = ..., return_lse: bool = ...,
                   kernel_options: Optional[Dict[str, Any]] = ..., *, context: Optional[Context] = ...,
                   timeout: Optional[float] = ...) -> Any: ...

class Format(NamedTuple):
    name: str
    block: int
    block_bytes: int
    row_scales: str  # "none", "required" or "optional"
    kv_only: bool
    tokens: int

def formats() -> Dict[str, Format]: ...

class KVCache:
    context: Context
    batch: int
    kv_heads: int
    capacity: int
    head_dim: int
    v_dim: int
    dtype: Optional[str]  # None when K and V differ
    k_dtype: str
    v_dtype: str
    scaled: bool
    k_row_bytes: int
    v_row_bytes: int
    block_size: Optional[int]
    def __init__(self, batch: int, kv_heads: int, capacity: int, head_dim: int, v_dim: Optional[int] = ...,
                 dtype: str = ..., block_size: Optional[int] = ..., context: Optional[Context] = ..., *,
                 k_dtype: Optional[str] = ..., v_dtype: Optional[str] = ..., scaled: bool = ..., prefix_capacity: int = ...) -> None: ...
    @classmethod
    def from_bytes(cls, k: Any, v: Any, lengths: Optional[Sequence[int]] = ..., *, dtype: Optional[str] = ...,
                   k_dtype: Optional[str] = ..., v_dtype: Optional[str] = ..., k_scales: Any = ..., v_scales: Any = ...,
                   capacity: Optional[int] = ..., block_size: Optional[int] = ...,
                   context: Optional[Context] = ...) -> "KVCache": ...
    def k_bytes(self) -> Any: ...
    def v_bytes(self) -> Any: ...
    def k_scales(self) -> Any: ...
    def v_scales(self) -> Any: ...
    def load_bytes(self, k: Any, v: Any, lengths: Optional[Sequence[int]] = ..., *, k_scales: Any = ...,
                   v_scales: Any = ...) -> None: ...
    @property
    def lengths(self) -> Tuple[int, ...]: ...
    @property
    def blocks_used(self) -> int: ...
    def reset(self) -> None: ...
    def append(self, key: Any, value: Any) -> None: ...
    def attend(self, query: Tensor, *, is_causal: bool = ..., scale: Optional[float] = ...,
               window: Optional[Tuple[Optional[int], Optional[int]]] = ..., softcap: Optional[float] = ...,
               sinks: Optional[Sequence[float]] = ..., alibi: Optional[Sequence[float]] = ...,
               logit_scale: Optional[Sequence[float]] = ..., return_lse: bool = ...,
               algorithm: str = ..., out: Optional[Tensor] = ...,
               prefixes: Optional[Sequence[Sequence[int]]] = ...) -> Union[Tensor, Tuple[Tensor, Tensor]]: ...
    def add_prefix(self, key: Any, value: Any) -> int: ...
    def device_arrays(self, queue: Any = ...) -> Any: ...
