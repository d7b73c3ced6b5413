# s3_blob_store_test: the S3 checkpoint backend (paddock_checkpoints_s3) against AWS's published
# SigV4 examples, a scripted HTTP server, and a real S3-compatible server: npm's s3rver, which
# scripts/setup-deps installs into third_party/node/ (PADDOCK_S3RVER in the environment overrides
# the path). Without it the server tests fail, naming scripts/setup-deps.
paddock_unit_test(s3_blob_store_test
  SOURCES s3_blob_store_test.cpp s3_signature_test.cpp s3_readers_test.cpp
  LIBS paddock_checkpoints_s3)
target_compile_definitions(s3_blob_store_test PRIVATE
  PADDOCK_S3RVER_DEFAULT="${PROJECT_SOURCE_DIR}/third_party/node/node_modules/.bin/s3rver")
