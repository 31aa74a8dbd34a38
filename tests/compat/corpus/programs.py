"""The corpus: each entry names a model from a published package (packages.py) and how the harness
feeds it small local data. The model code runs exactly as published; everything written here is the
adapter: the constructor call with small settings, the input, the target and the loss a user would put
around it.

Fields: package (a key of PACKAGES), module (what to import), build (expression evaluated in that
module's namespace), input / target ((kind, shape)), loss (expression over model, x, y, torch, F),
steps, lr; warmup: run one forward first (lazy layers take their shapes from it); torch_seeds: how many
torch runs give the spread (more for programs that sample).
A whole-program entry instead names a script (a path in its package), its command line (small settings,
a local environment from stubs/) and the tensorboard tag whose scalars are its losses; the harness runs
it as __main__ and gives the parameters each optimizer receives the same numpy start in both frameworks.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Program:
    package: str
    module: str
    build: str
    input: tuple[str, tuple[int, ...]] = ("float", (4, 3, 16, 16))
    target: tuple[str, tuple[int, ...]] = ("classes", (4,))
    loss: str = "F.cross_entropy(model(x), y)"
    classes: int = 5
    vocab: int = 24
    steps: int = 3
    lr: float = 1e-3
    eval_mode: bool = False
    warmup: bool = False
    torch_seeds: int = 2
    script: str | None = None
    argv: tuple[str, ...] = ()
    loss_tag: str = ""
    note: str = ""


IMG = ("float", (4, 3, 16, 16))
TOK = ("tokens", (2, 16))
TOK_T = ("classes", (2, 16))
LM_LOSS = "F.cross_entropy(model(x).reshape(-1, model(x).shape[-1]), y.reshape(-1))"

_VIT = "dim=32, depth=2, heads=2, mlp_dim=64, dim_head=16"

PROGRAMS: dict[str, Program] = {
    # ---- Phil Wang (lucidrains): vision transformers -------------------------------------------------
    "vit": Program("vit-pytorch", "vit_pytorch.vit", f"ViT(image_size=16, patch_size=4, num_classes=5, {_VIT})"),
    "simple_vit": Program("vit-pytorch", "vit_pytorch.simple_vit",
                          f"SimpleViT(image_size=16, patch_size=4, num_classes=5, {_VIT})"),
    "cait": Program("vit-pytorch", "vit_pytorch.cait",
                    f"CaiT(image_size=16, patch_size=4, num_classes=5, cls_depth=1, {_VIT})"),
    "deepvit": Program("vit-pytorch", "vit_pytorch.deepvit",
                       f"DeepViT(image_size=16, patch_size=4, num_classes=5, {_VIT})"),
    "cct": Program("vit-pytorch", "vit_pytorch.cct",
                   "CCT(img_size=(16, 16), embedding_dim=32, n_conv_layers=1, kernel_size=3, stride=1, padding=1,"
                   " pooling_kernel_size=3, pooling_stride=2, pooling_padding=1, num_layers=2, num_heads=2,"
                   " mlp_ratio=2., num_classes=5, positional_embedding='learnable', attention_dropout=0.,"
                   " stochastic_depth_rate=0.)"),
    "t2t_vit": Program("vit-pytorch", "vit_pytorch.t2t",
                       "T2TViT(image_size=16, num_classes=5, dim=32, depth=2, heads=2, mlp_dim=64, dim_head=16,"
                       " t2t_layers=((3, 2), (3, 2)))"),
    "levit": Program("vit-pytorch", "vit_pytorch.levit",
                     "LeViT(image_size=32, num_classes=5, stages=2, dim=(16, 32), depth=1, heads=(2, 2),"
                     " mlp_mult=2, dim_key=8, dim_value=8)", input=("float", (4, 3, 32, 32))),
    "cvt": Program("vit-pytorch", "vit_pytorch.cvt",
                   "CvT(num_classes=5, s1_emb_dim=16, s2_emb_dim=32, s3_emb_dim=32, s2_heads=2, s3_heads=2,"
                   " s3_depth=1)", input=("float", (4, 3, 32, 32))),
    "pit": Program("vit-pytorch", "vit_pytorch.pit",
                   "PiT(image_size=16, patch_size=4, num_classes=5, dim=16, depth=(1, 1), heads=2, mlp_dim=32,"
                   " dim_head=8)"),
    "cross_vit": Program("vit-pytorch", "vit_pytorch.cross_vit",
                         "CrossViT(image_size=16, num_classes=5, sm_dim=16, lg_dim=32, sm_patch_size=4,"
                         " sm_enc_depth=1, sm_enc_heads=2, sm_enc_mlp_dim=32, sm_enc_dim_head=8, lg_patch_size=8,"
                         " lg_enc_depth=1, lg_enc_heads=2, lg_enc_mlp_dim=32, lg_enc_dim_head=8,"
                         " cross_attn_depth=1, cross_attn_heads=2, cross_attn_dim_head=8, depth=1, dropout=0.,"
                         " emb_dropout=0.)"),
    "nest": Program("vit-pytorch", "vit_pytorch.nest",
                    "NesT(image_size=16, patch_size=4, num_classes=5, dim=16, heads=2, num_hierarchies=2,"
                    " block_repeats=(1, 1), dim_head=8)"),
    "max_vit": Program("vit-pytorch", "vit_pytorch.max_vit",
                       "MaxViT(num_classes=5, dim=16, depth=(1, 1), dim_head=8, dim_conv_stem=16, window_size=2,"
                       " dropout=0.)", input=("float", (2, 3, 16, 16)), target=("classes", (2,))),
    "xcit": Program("vit-pytorch", "vit_pytorch.xcit",
                    f"XCiT(image_size=16, patch_size=4, num_classes=5, cls_depth=1, {_VIT})"),
    "rvt": Program("vit-pytorch", "vit_pytorch.rvt", f"RvT(image_size=16, patch_size=4, num_classes=5, {_VIT})"),
    "vit_1d": Program("vit-pytorch", "vit_pytorch.vit_1d",
                      f"ViT(seq_len=32, patch_size=4, num_classes=5, channels=2, {_VIT})", input=("float", (4, 2, 32))),
    "vit_3d": Program("vit-pytorch", "vit_pytorch.vit_3d",
                      f"ViT(image_size=8, image_patch_size=4, frames=4, frame_patch_size=2, num_classes=5, {_VIT})",
                      input=("float", (2, 3, 4, 8, 8)), target=("classes", (2,))),
    "simple_vit_1d": Program("vit-pytorch", "vit_pytorch.simple_vit_1d",
                             f"SimpleViT(seq_len=32, patch_size=4, num_classes=5, channels=2, {_VIT})",
                             input=("float", (4, 2, 32))),
    "vivit": Program("vit-pytorch", "vit_pytorch.vivit",
                     "ViViT(image_size=8, image_patch_size=4, frames=4, frame_patch_size=2, num_classes=5, dim=32,"
                     " spatial_depth=1, temporal_depth=1, heads=2, mlp_dim=64, dim_head=16, use_flash_attn=False)",
                     input=("float", (2, 3, 4, 8, 8)), target=("classes", (2,))),
    "simple_vit_qk_norm": Program("vit-pytorch", "vit_pytorch.simple_vit_with_qk_norm",
                                  f"SimpleViT(image_size=16, patch_size=4, num_classes=5, {_VIT})"),
    "vit_patch_merger": Program("vit-pytorch", "vit_pytorch.vit_with_patch_merger",
                                f"ViT(image_size=16, patch_size=4, num_classes=5, patch_merge_layer=1,"
                                f" patch_merge_num_tokens=4, {_VIT})"),
    "vit_small_dataset": Program("vit-pytorch", "vit_pytorch.vit_for_small_dataset",
                                 f"ViT(image_size=16, patch_size=4, num_classes=5, {_VIT})"),
    "parallel_vit": Program("vit-pytorch", "vit_pytorch.parallel_vit",
                            f"ViT(image_size=16, patch_size=4, num_classes=5, {_VIT})"),
    # ---- Phil Wang: other architectures --------------------------------------------------------------
    "mlp_mixer": Program("mlp-mixer-pytorch", "mlp_mixer_pytorch.mlp_mixer_pytorch",
                         "MLPMixer(image_size=16, channels=3, patch_size=4, dim=32, depth=2, num_classes=5)"),
    "perceiver": Program("perceiver-pytorch", "perceiver_pytorch.perceiver_pytorch",
                         "Perceiver(input_channels=3, input_axis=2, num_freq_bands=2, max_freq=4., depth=1,"
                         " num_latents=8, latent_dim=16, cross_heads=1, latent_heads=2, cross_dim_head=8,"
                         " latent_dim_head=8, num_classes=5, self_per_cross_attn=1)",
                         input=("float", (2, 8, 8, 3)), target=("classes", (2,))),
    "linformer_lm": Program("linformer", "linformer.linformer",
                            "LinformerLM(num_tokens=24, dim=32, seq_len=16, depth=2, k=8, heads=2)",
                            input=TOK, target=TOK_T, loss=LM_LOSS),
    "bert_mlm": Program("pytorch-pretrained-bert", "pytorch_pretrained_bert.modeling",
                        "BertForMaskedLM(BertConfig(24, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,"
                        " intermediate_size=64, max_position_embeddings=32))",
                        input=TOK, target=TOK_T, loss="model(x, masked_lm_labels=y)",
                        torch_seeds=16, note="dropout 0.1 in the config's defaults: the torch runs spread"),
    "bert_classifier": Program("pytorch-pretrained-bert", "pytorch_pretrained_bert.modeling",
                               "BertForSequenceClassification(BertConfig(24, hidden_size=32, num_hidden_layers=2,"
                               " num_attention_heads=2, intermediate_size=64, hidden_dropout_prob=0.,"
                               " attention_probs_dropout_prob=0.), num_labels=5)",
                               input=TOK, target=("classes", (2,)), loss="model(x, labels=y)"),
    "bert_token_classifier": Program("pytorch-pretrained-bert", "pytorch_pretrained_bert.modeling",
                                     "BertForTokenClassification(BertConfig(24, hidden_size=32, num_hidden_layers=1,"
                                     " num_attention_heads=2, intermediate_size=64, hidden_dropout_prob=0.,"
                                     " attention_probs_dropout_prob=0.), num_labels=5)",
                                     input=TOK, target=("classes", (2, 16)), loss="model(x, labels=y)"),
    "gpt2_lm": Program("pytorch-pretrained-bert", "pytorch_pretrained_bert.modeling_gpt2",
                       "GPT2LMHeadModel(GPT2Config(24, n_positions=16, n_ctx=16, n_embd=32, n_layer=2, n_head=2))",
                       input=TOK, target=TOK_T, loss="model(x, lm_labels=y)"),
    "openai_gpt_lm": Program("pytorch-pretrained-bert", "pytorch_pretrained_bert.modeling_openai",
                             "OpenAIGPTLMHeadModel(OpenAIGPTConfig(24, n_positions=16, n_ctx=16, n_embd=32,"
                             " n_layer=2, n_head=2, resid_pdrop=0., embd_pdrop=0., attn_pdrop=0.))",
                             input=TOK, target=TOK_T, loss="model(x, lm_labels=y)"),
    "tcn": Program("pytorch-tcn", "pytorch_tcn",
                   "TCN(num_inputs=3, num_channels=[8, 8, 4], kernel_size=3, dropout=0., causal=True,"
                   " use_norm='weight_norm')", input=("float", (4, 3, 20)), target=("float", (4, 4, 20)),
                   loss="F.mse_loss(model(x), y)"),
    "tcn_batchnorm": Program("pytorch-tcn", "pytorch_tcn",
                             "TCN(num_inputs=3, num_channels=[8, 8], kernel_size=3, dropout=0., causal=False,"
                             " use_norm='batch_norm', use_skip_connections=True)",
                             input=("float", (4, 3, 20)), target=("float", (4, 8, 20)),
                             loss="F.mse_loss(model(x), y)"),
    # ---- Dive into Deep Learning (Zhang, Lipton, Li, Smola) ------------------------------------------
    # ---- Costa Huang et al. (CleanRL): whole single-file RL programs, a local CartPole / Pendulum ----------
    "cleanrl_dqn": Program("cleanrl", "", "", script="cleanrl/dqn.py", loss_tag="losses/td_loss",
                           argv=("--env-id", "CartPole-v1", "--total-timesteps", "600", "--learning-starts", "200",
                                 "--batch-size", "32", "--buffer-size", "1000", "--target-network-frequency", "100",
                                 "--cuda", "False"),
                           note="epsilon-greedy exploration and replay sampling from numpy/random, seeded by --seed"),
    "cleanrl_ddpg": Program("cleanrl", "", "", script="cleanrl/ddpg_continuous_action.py", loss_tag="losses/qf1_loss",
                            argv=("--env-id", "Pendulum-v1", "--total-timesteps", "500", "--learning-starts", "150",
                                  "--batch-size", "32", "--buffer-size", "1000", "--cuda", "False"),
                            torch_seeds=4, note="exploration noise from torch's generator: the torch runs spread"),
    "cleanrl_ppo_continuous": Program("cleanrl", "", "", script="cleanrl/ppo_continuous_action.py",
                                      loss_tag="losses/value_loss",
                                      argv=("--env-id", "Pendulum-v1", "--total-timesteps", "256", "--num-steps", "64",
                                            "--num-minibatches", "2", "--update-epochs", "2", "--cuda", "False"),
                                      torch_seeds=4, note="actions sampled from torch's Normal: the torch runs spread"),
    "cleanrl_rpo_continuous": Program("cleanrl", "", "", script="cleanrl/rpo_continuous_action.py",
                                      loss_tag="losses/value_loss",
                                      argv=("--env-id", "Pendulum-v1", "--total-timesteps", "256", "--num-steps", "64",
                                            "--num-minibatches", "2", "--update-epochs", "2", "--cuda", "False"),
                                      torch_seeds=4, note="actions sampled from torch's Normal: the torch runs spread"),
    "d2l_lenet": Program("d2l", "d2l.torch", "LeNet(lr=0.1, num_classes=5)", input=("float", (4, 1, 28, 28)),
                         warmup=True),
    "d2l_resnet18": Program("d2l", "d2l.torch", "resnet18(5, in_channels=1)", input=("float", (4, 1, 16, 16)),
                            warmup=True),
    "d2l_transformer_encoder": Program("d2l", "d2l.torch",
                                       "TransformerEncoder(24, 32, 64, 2, 2, 0.)", input=TOK,
                                       target=("float", (2, 16, 32)), loss="F.mse_loss(model(x, None), y)",
                                       warmup=True),
    "d2l_bert": Program("d2l", "d2l.torch", "BERTModel(24, num_hiddens=32, ffn_num_hiddens=64, num_heads=2,"
                        " num_blks=2, dropout=0., max_len=16)", input=TOK, target=TOK_T,
                        loss="F.cross_entropy(model(x, torch.zeros_like(x), None,"
                        " torch.arange(16).repeat(2, 1))[1].reshape(-1, 24), y.reshape(-1))",
                        warmup=True),
    "d2l_gru_lm": Program("d2l", "d2l.torch", "RNNLM(GRU(num_inputs=24, num_hiddens=32, num_layers=1),"
                          " vocab_size=24, lr=1.)",
                          input=TOK, target=TOK_T, warmup=True,
                          loss=LM_LOSS),
}
