"""`foilforge repro`'s runner (repro.py) and every DVC call it makes (dvc_api.py). No stage imports it, so no
stage of dvc.yaml depends on it: a change here reruns nothing."""
