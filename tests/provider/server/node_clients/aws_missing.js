// @aws-sdk/ec2-metadata-service asked for a key the instance does not have, and left to end by
// itself (no process.exit): it never reads the 404's body, so its socket stays open until the
// server closes the connection. Prints the error it got.
'use strict';
const {MetadataService} = require('@aws-sdk/ec2-metadata-service');

new MetadataService({httpOptions: {timeout: 2000}}).request('/latest/meta-data/no-such-key', {})
  .then((body) => console.log(JSON.stringify({body})), (error) => console.log(JSON.stringify({error: error.message})));
