"""A variational autoencoder, written as a PyTorch script: only the imports say aicraft
(aicraft.viz.save_image stands for torchvision.utils.save_image).

No download: the images are 28x28 in [0, 1], each one of eight fixed blurry blobs
with a little noise. Exits non-zero unless the test loss per image after training is
below --max-loss-ratio times the untrained model's.

    python vae.py --epochs 2 --train-size 512 --results results
"""
import argparse
import os
import sys

import aicraft as torch
import aicraft.nn as nn
import aicraft.nn.functional as F
import aicraft.optim as optim
from aicraft.utils.data import DataLoader, TensorDataset
from aicraft.viz import save_image


def synthetic_images(prototypes, n):
    """n images (n, 1, 28, 28) in [0, 1]: random prototypes with noise, clamped."""
    picks = torch.randint(0, len(prototypes), (n,))
    images = prototypes[picks] + 0.1 * torch.randn(n, 1, 28, 28)
    return images.clamp(0.0, 1.0)


def blob_prototypes(k):
    """k images, each a Gaussian blob at a random centre."""
    coords = torch.arange(28).float()
    centres = 6 + 16 * torch.rand(k, 2)
    rows = (coords.view(1, 28, 1) - centres[:, 0].view(k, 1, 1)) ** 2
    cols = (coords.view(1, 1, 28) - centres[:, 1].view(k, 1, 1)) ** 2
    return torch.exp(-(rows + cols) / 18.0).view(k, 1, 28, 28)


class VAE(nn.Module):
    def __init__(self, hidden=200, latent=10):
        super().__init__()
        self.fc1 = nn.Linear(784, hidden)
        self.fc21 = nn.Linear(hidden, latent)
        self.fc22 = nn.Linear(hidden, latent)
        self.fc3 = nn.Linear(latent, hidden)
        self.fc4 = nn.Linear(hidden, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    """Reconstruction (binary cross-entropy, summed) plus the KL divergence from N(0, I)."""
    bce = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def train(model, optimizer, train_loader, epoch):
    model.train()
    train_loss = 0
    for (data,) in train_loader:
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
    print("====> Epoch: {} Average loss: {:.4f}".format(epoch, train_loss / len(train_loader.dataset)))


def test(model, test_loader, epoch, results):
    model.eval()
    test_loss = 0
    with torch.no_grad():
        for i, (data,) in enumerate(test_loader):
            recon_batch, mu, logvar = model(data)
            test_loss += loss_function(recon_batch, data, mu, logvar).item()
            if i == 0 and results:
                n = min(data.size(0), 8)
                comparison = torch.cat([data[:n], recon_batch.view(-1, 1, 28, 28)[:n]])
                save_image(comparison, os.path.join(results, "reconstruction_%d.png" % epoch), nrow=n)
    test_loss /= len(test_loader.dataset)
    print("====> Test set loss: {:.4f}".format(test_loss))
    return test_loss


def main():
    parser = argparse.ArgumentParser(description="VAE on synthetic blobs")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--train-size", type=int, default=2048)
    parser.add_argument("--test-size", type=int, default=256)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--results", type=str, default="",
                        help="folder for reconstruction and sample images (none when empty)")
    parser.add_argument("--max-loss-ratio", type=float, default=0.7)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    prototypes = blob_prototypes(8)
    train_loader = DataLoader(TensorDataset(synthetic_images(prototypes, args.train_size)),
                              batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(TensorDataset(synthetic_images(prototypes, args.test_size)),
                             batch_size=args.batch_size)
    if args.results:
        os.makedirs(args.results, exist_ok=True)

    model = VAE()
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    untrained_loss = test(model, test_loader, 0, "")
    for epoch in range(1, args.epochs + 1):
        train(model, optimizer, train_loader, epoch)
        test_loss = test(model, test_loader, epoch, args.results)
        if args.results:
            with torch.no_grad():
                sample = model.decode(torch.randn(64, 10))
                save_image(sample.view(64, 1, 28, 28), os.path.join(args.results, "sample_%d.png" % epoch))

    if test_loss > args.max_loss_ratio * untrained_loss:
        sys.exit("test loss %.1f is not below %.2f x the untrained %.1f"
                 % (test_loss, args.max_loss_ratio, untrained_loss))


if __name__ == "__main__":
    main()
