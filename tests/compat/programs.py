"""Plain PyTorch programs (our own), each run twice by test_programs.py: as written, under torch, and after
renaming the imports to rumus. Every program ends with `result`, a dict of numbers the test compares.

They start their weights from numpy (`init_from_numpy`, ordinary PyTorch code) so both runs begin at the
same point; everything after that is the frameworks' own: forward, loss, backward, optimizer, scheduler.
"""

PRELUDE = '''
import math
import io
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset, TensorDataset


def init_from_numpy(model, seed=0, scale=0.3):
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy((rng.standard_normal(tuple(p.shape)) * scale).astype(np.float32)))
    return model


def data(seed, *shape):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))
'''

MLP_REGRESSION = '''
x = data(1, 64, 4)
y = (x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.1 * data(2, 64, 1)).squeeze(1)
loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=False)
model = init_from_numpy(nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1)))
opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
sched = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
losses = []
for epoch in range(4):
    total = 0.0
    for xb, yb in loader:
        opt.zero_grad()
        loss = F.mse_loss(model(xb).squeeze(-1), yb)
        loss.backward()
        opt.step()
        total += loss.item() * len(xb)
    sched.step()
    losses.append(float(f"{total / len(loader.dataset):.6f}"))
result = {"losses": losses, "lr": sched.get_last_lr()[0]}
'''

CNN_CLASSIFIER = '''
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.conv2 = nn.Conv2d(4, 8, 3, 1)
        self.dropout1 = nn.Dropout2d(0.25)
        self.fc1 = nn.Linear(8 * 2 * 2, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        return F.log_softmax(self.fc1(x), dim=1)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = init_from_numpy(Net()).to(device)
model.eval()  # dropout off: both runs must see the same network
images = data(3, 32, 1, 8, 8).to(device)
labels = torch.from_numpy(np.arange(32) % 10).long().to(device)
opt = optim.Adam(model.parameters(), lr=0.01)
for step in range(5):
    opt.zero_grad()
    loss = F.nll_loss(model(images), labels)
    loss.backward()
    opt.step()
with torch.no_grad():
    pred = model(images).argmax(dim=1, keepdim=True)
    correct = pred.eq(labels.view_as(pred)).sum().item()
result = {"loss": loss.item(), "correct": correct, "correct_is_int": isinstance(correct, int)}
'''

LSTM_LANGUAGE_MODEL = '''
class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=0.2)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid, self.nlayers = nhid, nlayers

    def forward(self, input, hidden):
        output, hidden = self.rnn(self.encoder(input), hidden)
        return F.log_softmax(self.decoder(output), dim=-1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


corpus = torch.from_numpy(np.random.default_rng(4).integers(0, 20, 6 * 24)).long()
batches = corpus.view(6, -1).t().contiguous()  # [24, 6]
model = init_from_numpy(RNNModel(20, 8, 12, 2), scale=0.2)
model.eval()  # inter-layer dropout off so both runs compute the same thing
criterion = nn.NLLLoss()
hidden = model.init_hidden(6)
losses = []
for i in range(0, batches.size(0) - 1, 6):
    seq_len = min(6, len(batches) - 1 - i)
    inp, target = batches[i:i + seq_len], batches[i + 1:i + 1 + seq_len].reshape(-1)
    hidden = repackage_hidden(hidden)
    model.zero_grad()
    output, hidden = model(inp, hidden)
    loss = criterion(output.view(-1, 20), target)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-1.0)
    losses.append(loss.item())
result = {"losses": losses, "ppl": math.exp(losses[-1])}
'''

GRU_PACKED_CLASSIFIER = '''
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(3, 6, batch_first=True, bidirectional=True)
        self.head = nn.Linear(12, 2)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, h = self.gru(packed)
        padded, lens = pad_packed_sequence(out, batch_first=True)
        feats = torch.cat([h[-2], h[-1]], dim=1)
        return self.head(feats), padded, lens


x = data(5, 4, 6, 3)
lengths = [3, 6, 2, 5]
y = torch.tensor([0, 1, 0, 1])
model = init_from_numpy(Classifier())
opt = optim.RMSprop(model.parameters(), lr=0.01)
for step in range(4):
    opt.zero_grad()
    logits, padded, lens = model(x, lengths)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    opt.step()
result = {"loss": loss.item(), "lens": lens.tolist(), "padded_sum": padded.sum().item(),
          "shape": list(padded.shape)}
'''

TRANSFORMER_SEQ2SEQ = '''
class Seq2Seq(nn.Module):
    def __init__(self, vocab, d_model=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.transformer = nn.Transformer(d_model, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                          dim_feedforward=32, dropout=0.0, batch_first=True)
        self.out = nn.Linear(d_model, vocab)

    def forward(self, src, tgt):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.size(1))
        h = self.transformer(self.embed(src), self.embed(tgt), tgt_mask=mask)
        return self.out(h)


rng = np.random.default_rng(6)
src = torch.from_numpy(rng.integers(1, 10, (4, 5))).long()
tgt = torch.flip(src, dims=[1])  # task: reverse the sequence
tgt_in = torch.cat([torch.zeros(4, 1, dtype=torch.long), tgt[:, :-1]], dim=1)
model = init_from_numpy(Seq2Seq(10), scale=0.2)
opt = optim.Adam(model.parameters(), lr=0.01)
losses = []
for step in range(6):
    opt.zero_grad()
    logits = model(src, tgt_in)
    loss = F.cross_entropy(logits.reshape(-1, 10), tgt.reshape(-1))
    loss.backward()
    opt.step()
    losses.append(loss.item())
result = {"losses": losses}
'''

CHECKPOINT_RESUME = '''
def make():
    model = init_from_numpy(nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1)))
    return model, optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)


x, y = data(7, 16, 3), data(8, 16, 1)


def train(model, opt, steps):
    out = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


model, opt = make()
first = train(model, opt, 3)
buffer = io.BytesIO()
torch.save({"epoch": 3, "model_state_dict": model.state_dict(), "optimizer_state_dict": opt.state_dict(),
            "loss": first[-1], "history": first}, buffer)
buffer.seek(0)
checkpoint = torch.load(buffer)
model2, opt2 = make()
model2.load_state_dict(checkpoint["model_state_dict"])
opt2.load_state_dict(checkpoint["optimizer_state_dict"])
resumed = train(model2, opt2, 3)
straight_model, straight_opt = make()
straight = train(straight_model, straight_opt, 6)
result = {"resumed": resumed, "straight_tail": straight[3:], "epoch": checkpoint["epoch"],
          "history": checkpoint["history"]}
'''

LBFGS_FIT = '''
t = torch.linspace(0, 1, 20)
target = 2.0 * torch.sin(3.0 * t) + 0.5
params = torch.tensor([1.0, 1.0, 0.0], requires_grad=True)
opt = optim.LBFGS([params], lr=1, max_iter=20, history_size=10, line_search_fn="strong_wolfe")


def closure():
    opt.zero_grad()
    pred = params[0] * torch.sin(params[1] * t) + params[2]
    loss = ((pred - target) ** 2).mean()
    loss.backward()
    return loss


for _ in range(3):
    final = opt.step(closure)
result = {"params": params.detach().tolist(), "loss": float(closure())}
'''

TIME_SEQUENCE = '''
class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 8)
        self.lstm2 = nn.LSTMCell(8, 8)
        self.linear = nn.Linear(8, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), 8, dtype=torch.float)
        c_t = torch.zeros(input.size(0), 8, dtype=torch.float)
        h_t2 = torch.zeros(input.size(0), 8, dtype=torch.float)
        c_t2 = torch.zeros(input.size(0), 8, dtype=torch.float)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


waves = torch.sin(torch.arange(12).float().unsqueeze(0) / 2.0 + torch.arange(3).float().unsqueeze(1))
input, target = waves[:, :-1], waves[:, 1:]
seq = init_from_numpy(Sequence(), scale=0.3)
criterion = nn.MSELoss()
optimizer = optim.Adam(seq.parameters(), lr=0.02)
for i in range(4):
    optimizer.zero_grad()
    loss = criterion(seq(input), target)
    loss.backward()
    optimizer.step()
with torch.no_grad():
    future = seq(input, future=3)
result = {"loss": loss.item(), "future_tail": future[:, -3:].reshape(-1).tolist()}
'''

TENSOR_IDIOMS = '''
x = data(9, 4, 5)
mask = torch.tril(torch.ones(4, 4)).bool()
scores = torch.einsum("id,jd->ij", x, x).masked_fill(~mask, float("-inf"))
attn = scores.softmax(dim=-1)
counts = (x > 0).sum()
signs = torch.where(x > 0, 1, 0)
csum = torch.cumsum(x, dim=1)
cprod = torch.cumprod(x.abs() + 0.5, dim=0)
rolled = torch.roll(x, shifts=2, dims=1)
flipped = x.flip(0)
rep = x[:2].repeat(2, 3)
inter = torch.repeat_interleave(torch.tensor([1, 2, 3]), 2)
normed = F.normalize(x, dim=1)
cos = F.cosine_similarity(x[:2], x[2:], dim=1)
gx, gy = torch.meshgrid(torch.arange(3), torch.arange(2), indexing="ij")
z = x.new_zeros(2, 2) + x.new_ones(2, 2) * 3
scattered = torch.zeros(3, 5).scatter_(1, torch.tensor([[0], [2], [4]]), 1.0)
acc = torch.zeros(3).index_add_(0, torch.tensor([0, 2, 0]), torch.tensor([1.0, 2.0, 3.0]))
pad = F.pad(x.view(1, 1, 4, 5), (1, 1, 2, 0), mode="replicate")
up = F.interpolate(x.view(1, 1, 4, 5), scale_factor=2, mode="bilinear", align_corners=False)
result = {
    "attn_diag": [attn[i, i].item() for i in range(4)],
    "counts": counts.item(), "counts_dtype": str(counts.dtype).split(".")[-1],
    "signs_dtype": str(signs.dtype).split(".")[-1], "signs": signs.sum().item(),
    "csum": csum[:, -1].tolist(), "cprod": cprod[-1].tolist(), "rolled": rolled[0].tolist(),
    "flipped": flipped[0].tolist(), "rep": list(rep.shape) + [rep.sum().item()], "inter": inter.tolist(),
    "normed": normed.norm(dim=1).tolist(), "cos": cos.tolist(), "grid": (gx * 10 + gy).flatten().tolist(),
    "z": z.sum().item(), "scattered": scattered.sum(1).tolist(), "acc": acc.tolist(),
    "pad": pad.sum().item(), "up": up.mean().item(), "norm": f"{x.norm():.4f}", "equal": torch.equal(x, x.clone()),
    "tri": torch.triu(x, diagonal=1).sum().item(),
}
'''

VAE = '''
class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 8)
        self.fc21 = nn.Linear(8, 2)
        self.fc22 = nn.Linear(8, 2)
        self.fc3 = nn.Linear(2, 8)
        self.fc4 = nn.Linear(8, 12)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar, eps):
        std = torch.exp(0.5 * logvar)
        return mu + eps * std

    def decode(self, z):
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

    def forward(self, x, eps):
        mu, logvar = self.encode(x.view(-1, 12))
        return self.decode(self.reparameterize(mu, logvar, eps)), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 12), reduction="sum")
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


x = torch.sigmoid(data(10, 16, 12))
model = init_from_numpy(VAE(), scale=0.2)
optimizer = optim.Adam(model.parameters(), lr=1e-2)
losses = []
for step in range(5):
    eps = data(100 + step, 16, 2)  # the noise comes from the data side so both runs draw the same
    optimizer.zero_grad()
    recon, mu, logvar = model(x, eps)
    loss = loss_function(recon, x, mu, logvar)
    loss.backward()
    optimizer.step()
    losses.append(loss.item() / len(x))
result = {"losses": losses}
'''

RNN_CLASSIFIER_ALL_OPTIMIZERS = '''
class RNNNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(4, 6, num_layers=2, batch_first=True, nonlinearity="tanh")
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        out, h = self.rnn(x)
        return self.fc(out[:, -1, :])


x = data(11, 8, 5, 4)
y = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
finals = {}
for name, kwargs in [("Adadelta", {"lr": 1.0}), ("Adagrad", {"lr": 0.05}), ("RMSprop", {"lr": 0.01}),
                     ("Adamax", {"lr": 0.02}), ("NAdam", {"lr": 0.02}), ("RAdam", {"lr": 0.02}),
                     ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True})]:
    model = init_from_numpy(RNNNet())
    opt = getattr(optim, name)(model.parameters(), **kwargs)
    for step in range(4):
        def closure():
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            return loss
        loss = opt.step(closure)
    finals[name] = loss.item()
result = finals
'''

HOOKS_AND_STATE = '''
features = {}


def save_output(name):
    def hook(module, inputs, output):
        features[name] = output.detach()
    return hook


model = init_from_numpy(nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2)))
handle = model[1].register_forward_hook(save_output("relu"))
pre = model[0].register_forward_pre_hook(lambda m, args: (args[0] * 2,))
out = model(data(12, 3, 4))
handle.remove()
pre.remove()
out2 = model(data(12, 3, 4))
state = model.state_dict()
state["extra.weight"] = torch.zeros(1)
del state["2.bias"]
incompatible = model.load_state_dict(state, strict=False)
result = {"relu_mean": features["relu"].mean().item(), "out": out.sum().item(), "out2": out2.sum().item(),
          "missing": incompatible.missing_keys, "unexpected": incompatible.unexpected_keys,
          "n_features": len(features)}
'''

DEVICE_AGNOSTIC_DATASET = '''
class Squares(Dataset):
    def __init__(self, n):
        self.x = torch.arange(n, dtype=torch.float).unsqueeze(1) / n
        self.y = (self.x ** 2).squeeze(1)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


use_cuda = torch.cuda.is_available()
device = torch.device("cuda" if use_cuda else "cpu")
loader = DataLoader(Squares(24), batch_size=8)
model = init_from_numpy(nn.Sequential(nn.Linear(1, 8), nn.Sigmoid(), nn.Linear(8, 1))).to(device)
opt = optim.Adagrad(model.parameters(), lr=0.1)
log = []
for epoch in range(3):
    for batch_idx, (xb, yb) in enumerate(loader):
        xb, yb = xb.to(device), yb.to(device)
        opt.zero_grad()
        loss = F.smooth_l1_loss(model(xb).squeeze(1), yb)
        loss.backward()
        opt.step()
    log.append(f"epoch {epoch}: loss {loss:.5f}")
ids = torch.tensor([3, 1, 2]).long()
result = {"log": log, "use_cuda": use_cuda, "long": str(ids.dtype).split(".")[-1],
          "float": str(torch.ones(1, dtype=torch.float).dtype).split(".")[-1],
          "double": str(torch.ones(1, dtype=torch.double).dtype).split(".")[-1]}
'''

UPSAMPLING_AUTOENCODER = '''
class AE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Conv2d(1, 4, 3, stride=2, padding=1)
        self.dec = nn.Conv2d(4, 1, 3, padding=1)

    def forward(self, x):
        h = F.relu(self.enc(x))
        h = F.interpolate(h, scale_factor=2, mode="nearest")
        return self.dec(F.pad(h, (0, 0, 0, 0)))


images = torch.sigmoid(data(13, 4, 1, 8, 8))
model = init_from_numpy(AE(), scale=0.3)
opt = optim.AdamW(model.parameters(), lr=0.01)
losses = []
for step in range(5):
    opt.zero_grad()
    loss = F.mse_loss(model(images), images)
    loss.backward()
    opt.step()
    losses.append(loss.item())
up = F.interpolate(images[:1], size=(5, 11), mode="bilinear", align_corners=True)
result = {"losses": losses, "up": up.sum().item(), "kl": F.kl_div(images.flatten(1).log_softmax(1),
                                                                  images.flatten(1).flip(1).softmax(1),
                                                                  reduction="batchmean").item()}
'''

PROGRAMS = {
    "mlp_regression": MLP_REGRESSION, "cnn_classifier": CNN_CLASSIFIER, "lstm_language_model": LSTM_LANGUAGE_MODEL,
    "gru_packed_classifier": GRU_PACKED_CLASSIFIER, "transformer_seq2seq": TRANSFORMER_SEQ2SEQ,
    "checkpoint_resume": CHECKPOINT_RESUME, "lbfgs_fit": LBFGS_FIT, "time_sequence": TIME_SEQUENCE,
    "tensor_idioms": TENSOR_IDIOMS, "vae": VAE, "rnn_all_optimizers": RNN_CLASSIFIER_ALL_OPTIMIZERS,
    "hooks_and_state": HOOKS_AND_STATE, "device_agnostic_dataset": DEVICE_AGNOSTIC_DATASET,
    "upsampling_autoencoder": UPSAMPLING_AUTOENCODER,
}
