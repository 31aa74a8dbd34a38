"""The public packages the corpus programs come from, pinned by version and wheel hash.

The programs' code is not copied into this repository: `fetch_packages.py` downloads these wheels from
PyPI with pip (the ordinary client) into a cache outside git, checks each hash and unpacks it, and the
harness imports the programs from there exactly as their authors published them. Each package's own
licence file travels inside its wheel (``*.dist-info``); the table below names it.
"""

from __future__ import annotations

from typing import NamedTuple


class Package(NamedTuple):
    version: str
    wheel: str
    sha256: str
    licence: str
    authors: str
    home: str


PACKAGES: dict[str, Package] = {
    "vit-pytorch": Package(
        "1.26.14", "vit_pytorch-1.26.14-py3-none-any.whl",
        "419f16be5718c6e50073caaefbbef05797b518708fd4e8467818655fa658ce68",
        "MIT", "Phil Wang (lucidrains) and contributors", "https://github.com/lucidrains/vit-pytorch"),
    "mlp-mixer-pytorch": Package(
        "0.3.1", "mlp_mixer_pytorch-0.3.1-py3-none-any.whl",
        "84a10f77a3fb0a12067fac38890f67ef0153d88f1b2b2283b8efe705e7906a6b",
        "MIT", "Phil Wang (lucidrains)", "https://github.com/lucidrains/mlp-mixer-pytorch"),
    "perceiver-pytorch": Package(
        "0.11.0", "perceiver_pytorch-0.11.0-py3-none-any.whl",
        "4c21ef3dd6d7cbb87ec8b0f3ddfd80acd3225c5d41220c85762ca878bc752e26",
        "MIT", "Phil Wang (lucidrains)", "https://github.com/lucidrains/perceiver-pytorch"),
    "linformer": Package(
        "0.2.3", "linformer-0.2.3-py3-none-any.whl",
        "6e44ab72443014582c967d4323e8034e8e0f51e9a0ab360c22c4e4c47366f13e",
        "MIT", "Phil Wang (lucidrains)", "https://github.com/lucidrains/linformer"),
    "pytorch-pretrained-bert": Package(
        "0.6.2", "pytorch_pretrained_bert-0.6.2-py3-none-any.whl",
        "ddd86f2f4ca595a2ad05d48c35d4f5c1c5f150bef79d56e3159701840a574d06",
        "Apache-2.0", "Thomas Wolf, Victor Sanh, Tim Rault (Hugging Face), Google AI Language, OpenAI",
        "https://github.com/huggingface/transformers (v0.6.2)"),
    "pytorch-tcn": Package(
        "1.2.3", "pytorch_tcn-1.2.3-py3-none-any.whl",
        "949dd478c7a7c04e2ba0d79e19afe4a34f083141ef908019d19e9edd729ea2ec",
        "MIT", "Paul Krug", "https://github.com/paul-krug/pytorch-tcn"),
    "d2l": Package(
        "1.0.3", "d2l-1.0.3-py3-none-any.whl",
        "c625a01e66eb5d793a7e0a6f8582b1e1e35dfad02b5e77f3d2ab299d07177ba6",
        "MIT-0", "Aston Zhang, Zachary Lipton, Mu Li, Alexander Smola (D2L developers)", "https://github.com/d2l-ai/d2l-en"),
    "cleanrl": Package(
        "1.2.0", "cleanrl-1.2.0-py3-none-any.whl",
        "002f6dac6cd0efb5889cd9096a252da1b4bc98a8f52ccb1f47a7215c18b30369",
        "MIT", "Costa Huang and CleanRL contributors", "https://github.com/vwxyzjn/cleanrl"),
    # A dependency of the lucidrains programs (tensor rearrangement that dispatches on the torch module).
    "einops": Package(
        "0.8.2", "einops-0.8.2-py3-none-any.whl",
        "54058201ac7087911181bfec4af6091bb59380360f069276601256a76af08193",
        "MIT", "Alex Rogozhnikov", "https://github.com/arogozhnikov/einops"),
}


# Larger model code the API coverage scan reads (docs/api_coverage.py); never run, only parsed.
SCAN_PACKAGES: dict[str, Package] = {
    "torchvision": Package(
        "0.29.1", "torchvision-0.29.1-cp311-cp311-manylinux_2_28_x86_64.whl",
        "2cb678029a5dd45afbbfa662fce49736827d52be33242b5a8a731e0db02ccdf5",
        "BSD-3-Clause", "PyTorch contributors", "https://github.com/pytorch/vision"),
    "timm": Package(
        "1.0.31", "timm-1.0.31-py3-none-any.whl",
        "5bd50f7d0fe6d09bf9285ac2523234a1b7e6bf075c0be3e7aed09139fcb617c7",
        "Apache-2.0", "Ross Wightman and contributors", "https://github.com/huggingface/pytorch-image-models"),
    "transformers": Package(
        "5.23.0", "transformers-5.23.0-py3-none-any.whl",
        "018e82fd07490ad5bb58414f65e31576033dc7f36bed10c574843f69b90991bf",
        "Apache-2.0", "The Hugging Face team", "https://github.com/huggingface/transformers"),
}
