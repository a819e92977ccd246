"""Print a params profile (profiles/NAME.yaml) as `dvc exp run --set-param` overrides, or as the merged params.

    foilforge profile paper                 # -S key=value ... (what `make repro PROFILE=paper` passes to dvc exp run)
    foilforge profile paper --merged        # params.yaml with the profile applied, as YAML

`foilforge check-params --profile paper` validates the merged params first.
"""

from __future__ import annotations

from foilforge.params import load_params, load_profile, merge_profile, profile_overrides


def add_arguments(parser) -> None:
    parser.add_argument("profile", help="profile name (profiles/NAME.yaml) or a path to a YAML overlay")
    parser.add_argument("--merged", action="store_true", help="print the merged params instead of the overrides")


def main(args) -> int:
    import yaml

    params, overlay = load_params(args.params), load_profile(args.profile)
    if args.merged:
        print(yaml.safe_dump(merge_profile(params, overlay), sort_keys=False), end="")
    else:
        print(" ".join(f"-S {override}" for override in profile_overrides(overlay, params)))
    return 0
