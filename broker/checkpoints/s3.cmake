# paddock_checkpoints_s3: the S3-compatible BlobStore (s3_blob_store.h): SigV4 over libcurl and
# OpenSSL, with its own small readers for the credentials file and S3's XML. Included from this
# folder's CMakeLists.txt, after paddock_checkpoints, whose blob_store.cpp holds blobKeyProblem.
find_package(OpenSSL REQUIRED)
add_library(paddock_checkpoints_s3 STATIC
  s3_blob_store.cpp s3_credentials.cpp s3_errors.cpp s3_http.cpp s3_signature.cpp s3_xml.cpp)
paddock_target(paddock_checkpoints_s3)
target_link_libraries(paddock_checkpoints_s3 PUBLIC paddock_checkpoints paddock_common CURL::libcurl
  PRIVATE paddock_checkpoint OpenSSL::Crypto)
