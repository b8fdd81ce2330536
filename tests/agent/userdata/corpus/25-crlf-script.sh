#!/bin/sh
echo crlf
echo done
