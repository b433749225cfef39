"""The synthetic task and the CIFAR-10 reader (on tiny batch files written here)."""

import pickle

import pytest
import torch

from trainer.data import CIFAR_TEST_FILE, CIFAR_TRAIN_FILES, DataError, load_cifar10, load_task, make_synthetic


def test_synthetic_is_deterministic_and_shaped():
    a, b = make_synthetic(1, 64, 32), make_synthetic(1, 64, 32)
    assert a.train_x.shape == (64, 3, 32, 32) and a.val_x.shape == (32, 3, 32, 32)
    assert torch.equal(a.train_x, b.train_x) and torch.equal(a.val_y, b.val_y)
    assert not torch.equal(make_synthetic(2, 64, 32).train_x, a.train_x)
    assert a.train_y.min() >= 0 and a.train_y.max() < 10 and len(set(a.train_y.tolist())) > 5
    assert abs(float(a.train_x.mean())) < 0.2 and 0.5 < float(a.train_x.std()) < 1.5


def test_synthetic_does_not_touch_global_rng():
    torch.manual_seed(0)
    expected = torch.rand(1)
    torch.manual_seed(0)
    make_synthetic(0, 16, 16)
    assert torch.equal(torch.rand(1), expected)


def test_synthetic_defeats_a_linear_probe():
    """The class is in local texture at a random position, not in any pixel: a linear probe on raw
    pixels stays near chance (the CNN host reaches 60-80%, see bench/learning.py)."""
    data = make_synthetic(0, 1024, 512)
    probe = torch.nn.Linear(3 * 32 * 32, 10)
    opt = torch.optim.Adam(probe.parameters(), lr=1e-3)
    for _ in range(60):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(probe(data.train_x.flatten(1)), data.train_y).backward()
        opt.step()
    acc = (probe(data.val_x.flatten(1)).argmax(1) == data.val_y).float().mean()
    assert float(acc) < 0.35


def _write_batch(path, images, labels):
    np = pytest.importorskip("numpy")
    with open(path, "wb") as fh:
        pickle.dump({b"batch_label": b"test", b"labels": labels,
                     b"data": np.asarray(images, dtype=np.uint8).reshape(len(labels), 3072)}, fh, protocol=2)


@pytest.fixture()
def cifar_dir(tmp_path):
    for i, name in enumerate((*CIFAR_TRAIN_FILES, CIFAR_TEST_FILE)):
        images = [[(i * 7 + j) % 256] * 3072 for j in range(4)]
        _write_batch(tmp_path / name, images, [j % 10 for j in range(4)])
    return tmp_path


def test_cifar_reader_reads_the_pickle_batches(cifar_dir):
    data = load_cifar10(cifar_dir)
    assert data.name == "cifar10" and data.n_train == 20 and data.n_val == 4
    assert data.train_x.shape == (20, 3, 32, 32) and data.train_x.dtype == torch.float32
    assert data.train_y.tolist()[:4] == [0, 1, 2, 3]
    # pixel value 7 of batch 2, image 0, red channel, normalized with CIFAR's mean/std
    assert float(data.train_x[4, 0, 0, 0]) == pytest.approx((7 / 255 - 0.4914) / 0.2470, rel=1e-5)
    small = load_task("cifar10", seed=0, n_train=6, n_val=2, data_dir=str(cifar_dir))
    assert small.n_train == 6 and small.n_val == 2


def test_cifar_reader_accepts_the_extracted_folder(cifar_dir, tmp_path_factory):
    parent = tmp_path_factory.mktemp("parent")
    (parent / "cifar-10-batches-py").symlink_to(cifar_dir, target_is_directory=True)
    assert load_cifar10(parent).n_train == 20


def test_cifar_errors_name_the_flag(tmp_path, cifar_dir):
    with pytest.raises(DataError, match="--data-dir .*not a directory"):
        load_cifar10(tmp_path / "nowhere")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match="missing CIFAR-10 batch files data_batch_1"):
        load_cifar10(empty)
    (cifar_dir / "data_batch_3").write_bytes(b"not a pickle")
    with pytest.raises(DataError, match="data_batch_3 is not a CIFAR-10 python batch"):
        load_cifar10(cifar_dir)
    with pytest.raises(DataError, match="--task cifar10 needs --data-dir"):
        load_task("cifar10", seed=0, n_train=1, n_val=1)


def test_cifar_reader_refuses_foreign_objects(cifar_dir):
    class Evil:
        def __reduce__(self):
            return (print, ("should never run",))

    with open(cifar_dir / CIFAR_TEST_FILE, "wb") as fh:
        pickle.dump({b"data": Evil(), b"labels": [0]}, fh)
    with pytest.raises(DataError, match="unexpected object builtins.print"):
        load_cifar10(cifar_dir)


def test_cifar_reader_checks_shapes(cifar_dir):
    _write_batch(cifar_dir / CIFAR_TEST_FILE, [[0] * 3072] * 3, [1, 2, 3])
    with open(cifar_dir / CIFAR_TEST_FILE, "rb") as fh:
        batch = pickle.load(fh)
    batch[b"labels"] = [1, 2]
    with open(cifar_dir / CIFAR_TEST_FILE, "wb") as fh:
        pickle.dump(batch, fh, protocol=2)
    with pytest.raises(DataError, match="N×3072 images and N labels"):
        load_cifar10(cifar_dir)
