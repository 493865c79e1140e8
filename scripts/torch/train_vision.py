#!/usr/bin/env python3
# scripts/torch/train_vision.py - torchvision VGG-16 / ResNet-50 trained on
# seeded synthetic 224x224 images with SGD.  Plain PyTorch: no vmem code;
# run it under vmem with scripts/vmem-run.  Two runs with the same
# arguments print the same losses bit for bit (deterministic cuDNN and
# cuBLAS settings), which is what the vmem validation compares.
#
#   python3 train_vision.py --model vgg16 --batch 32 --iters 5 [--dtype bf16] [--json]
"""Train torchvision VGG-16 or ResNet-50 on synthetic data (plain PyTorch)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (sets CUBLAS_WORKSPACE_CONFIG before torch loads)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torchvision  # noqa: E402


def build(name, classes):
	if name == 'vgg16':
		return torchvision.models.vgg16(weights=None, num_classes=classes)
	return torchvision.models.resnet50(weights=None, num_classes=classes)


def trunk_and_head(model, name):
	"""The model as (list of trunk modules, head function) for --checkpoint."""
	if name == 'vgg16':
		trunk = list(model.features)

		def head(t):
			return model.classifier(torch.flatten(model.avgpool(t), 1))
	else:
		trunk = [model.conv1, model.bn1, model.relu, model.maxpool,
			 model.layer1, model.layer2, model.layer3, model.layer4]

		def head(t):
			return model.fc(torch.flatten(model.avgpool(t), 1))
	return trunk, head


def main():
	p = common.parser('Train torchvision VGG-16 or ResNet-50 on seeded synthetic data '
			  '(plain PyTorch; put vmem under it with vmem-run).')
	p.add_argument('--model', choices=['vgg16', 'resnet50'], default='vgg16')
	p.add_argument('--image-size', type=int, default=224, help='image side (default %(default)s)')
	p.add_argument('--classes', type=int, default=1000, help='classes (default %(default)s)')
	p.add_argument('--data-batches', type=int, default=2,
		       help='distinct synthetic batches, cycled (default %(default)s)')
	common.add_common_args(p, batch=32, iters=5)
	args = p.parse_args()
	dev = common.setup(args)

	model = build(args.model, args.classes).to(dev)
	model.train()
	g = torch.Generator().manual_seed(args.seed + 1)
	batches = []
	for _ in range(max(1, args.data_batches)):
		x = torch.randn(args.batch, 3, args.image_size, args.image_size, generator=g)
		y = torch.randint(0, args.classes, (args.batch,), generator=g)
		batches.append((x.to(dev), y.to(dev)))
	criterion = nn.CrossEntropyLoss()
	trunk, head = trunk_and_head(model, args.model)

	def step_loss(m, x, y):
		if args.checkpoint:
			out = head(common.checkpoint_sequential(trunk, args.checkpoint_segments, x))
		else:
			out = m(x)
		return criterion(out, y)

	extra = {'model': args.model, 'image_size': args.image_size, 'unit': 'images',
		 'params': sum(q.numel() for q in model.parameters())}
	return common.train(args, dev, model, batches, step_loss, args.batch, 'train_vision', extra)


if __name__ == '__main__':
	sys.exit(main())
