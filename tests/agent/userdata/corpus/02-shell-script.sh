#!/bin/bash
set -e
echo 'hello from user-data' > /tmp/hello
