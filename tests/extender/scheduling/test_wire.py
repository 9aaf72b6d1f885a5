import msgspec
from hypothesis import given
from hypothesis import strategies as st

from extender.scheduling.wire import ENCODER, FilterResult, NodeList, encode_filter_result

names = st.text(max_size=6)
nodes = st.lists(
    st.dictionaries(st.sampled_from(["metadata", "spec", "status"]), st.dictionaries(names, names)),
    max_size=4,
)


@given(
    nodes=st.none() | nodes,
    node_names=st.none() | st.lists(names, max_size=3),
    failed=st.dictionaries(names, names, max_size=3),
    unresolvable=st.dictionaries(names, names, max_size=3),
    error=names,
)
def test_joined_encoding_equals_plain_encoding(
    nodes: list[dict[str, object]] | None,
    node_names: list[str] | None,
    failed: dict[str, str],
    unresolvable: dict[str, str],
    error: str,
) -> None:
    items = None if nodes is None else [msgspec.Raw(ENCODER.encode(n)) for n in nodes]
    result = FilterResult(
        Nodes=None if items is None else NodeList(items=items),
        NodeNames=node_names,
        FailedNodes=failed,
        FailedAndUnresolvableNodes=unresolvable,
        Error=error,
    )
    assert encode_filter_result(result) == ENCODER.encode(result)
