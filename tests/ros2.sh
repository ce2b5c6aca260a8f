#!/usr/bin/env bash
# looptime.ros against a real rclpy, in two virtual environments: ROS 2
# Jazzy (rclpy 7.1.6, the LTS) and Kilted (rclpy 9.1.2, which hands
# TimerInfo), from the PyPI wheels of the ros-python-wheels project
# (docs/ros2.md). DDS stays on loopback with a random domain; every run is
# under a timeout. A ROS wheel that cannot be installed fails the suite.
# Then docs/ros2.md's shell blocks run in the Kilted venv (docs that run).
# Usage: tests/ros2.sh WHEEL_DIR (the looptime wheel the Python suite built).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/target_dir.sh
wheels=${1:?the directory of the looptime wheel}
export LOOPTIME_ANALYZER="$TARGET_DIR/debug/analyze_control_timing"
[[ -x "$LOOPTIME_ANALYZER" ]] || cargo build -q -p looptime-analyze --bin analyze_control_timing
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export ROS_DOMAIN_ID=$((RANDOM % 100 + 100))
export RMW_IMPLEMENTATION=rmw_fastrtps_cpp
for distro in "jazzy 7.1.6" "kilted 9.1.2"; do
    set -- $distro
    name=$1 rclpy=$2
    venv="$TARGET_DIR/ros-venv-$name"
    start=$SECONDS
    if [[ ! -x "$venv/bin/python" ]]; then
        python3 -m venv "$venv"
    fi
    "$venv/bin/python" -m pip install -q --disable-pip-version-check \
        "ros-$name-rclpy==$rclpy" "ros-$name-std-msgs" "ros-$name-std-srvs" "ros-$name-sensor-msgs" "ros-$name-diagnostic-msgs" "ros-$name-rmw-fastrtps-cpp" pytest
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$wheels"/looptime-*.whl
    echo "ros2 ($name, rclpy $rclpy): venv ready in $((SECONDS - start)) s"
    timeout 300 "$venv/bin/python" -m pytest -q -p no:cacheprovider crates/python/tests_ros
done
# docs/ros2.md's commands as a user types them, in the Kilted venv (its
# `python` first on PATH; scripts/docs_run.py, docs/docs-run.md).
start=$SECONDS
PATH="$TARGET_DIR/ros-venv-kilted/bin:$PATH" timeout 600 python3 scripts/docs_run.py docs/ros2.md
echo "ros2: docs/ros2.md's commands ran in $((SECONDS - start)) s"
