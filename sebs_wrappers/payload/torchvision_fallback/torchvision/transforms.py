"""The four image transforms SeBS's image-recognition uses, on PIL images and torch tensors."""

from __future__ import annotations

import torch
from PIL import Image


class Compose:
    def __init__(self, transforms: list) -> None:
        self.transforms = list(transforms)

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class Resize:
    """Scale so the shorter side is ``size`` pixels (bilinear), keeping the aspect ratio."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __call__(self, img: Image.Image) -> Image.Image:
        w, h = img.size
        if w <= h:
            new = (self.size, max(1, round(h * self.size / w)))
        else:
            new = (max(1, round(w * self.size / h)), self.size)
        return img.resize(new, Image.BILINEAR)


class CenterCrop:
    def __init__(self, size: int) -> None:
        self.size = size

    def __call__(self, img: Image.Image) -> Image.Image:
        w, h = img.size
        left = round((w - self.size) / 2)
        top = round((h - self.size) / 2)
        return img.crop((left, top, left + self.size, top + self.size))


class ToTensor:
    """PIL image (H, W, C uint8) to a float tensor (C, H, W) in [0, 1]."""

    def __call__(self, img: Image.Image) -> torch.Tensor:
        img = img.convert("RGB")
        data = torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8)
        w, h = img.size
        return data.view(h, w, 3).permute(2, 0, 1).float().div(255.0)


class Normalize:
    def __init__(self, mean: list[float], std: list[float]) -> None:
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        return (t - self.mean) / self.std
