// The AWS SDK's IMDS clients over IPv6, as on a Nitro instance with the IPv6 endpoint enabled:
// fromInstanceMetadata in AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=IPv6 (http://[fd00:ec2::254]),
// MetadataService given that endpoint (it does not read the mode variable).
'use strict';
const {fromInstanceMetadata} = require('@smithy/credential-provider-imds');
const {MetadataService} = require('@aws-sdk/ec2-metadata-service');
const run = require('./run.js');

const service = new MetadataService({endpoint: 'http://[fd00:ec2::254]', httpOptions: {timeout: 2000}});
run([
  ['credentials', async () => {
    const credentials = await fromInstanceMetadata({timeout: 2000, maxRetries: 1})();
    return {...credentials, expiration: credentials.expiration.toISOString()};
  }],
  ['instance_id', () => service.request('/latest/meta-data/instance-id', {})],
  ['ipv6', () => service.request('/latest/meta-data/ipv6', {})],
]);
