"""Tamiyo: the policy that picks each slot's lifecycle action (germinate, wait, fossilize, prune…) once per epoch.
The actions and their masks (``actions``, ``masks``), what the policy sees (``features``), a hand-written heuristic
(``heuristic``) and the LSTM policy that Simic trains with PPO (``policy``)."""
