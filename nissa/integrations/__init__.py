"""Nissa inside the training frameworks and loggers people already use: ``nissa.integrations.lightning``
(``NissaCallback``, ``RunLogger``), ``.transformers`` (``NissaCallback``), ``.accelerate`` (``NissaTracker``) and
``.tensorboard`` (``SummaryWriter``, a drop-in for ``torch.utils.tensorboard``'s). Each imports its framework; the
other way, reading TensorBoard's files into runs, is ``nissa.importer``."""
