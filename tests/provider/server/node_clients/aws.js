// The AWS SDK's IMDS clients with their defaults (http://169.254.169.254, IMDSv2 tokens):
// @smithy/credential-provider-imds (what @aws-sdk/credential-providers' fromInstanceMetadata and the
// default chain run on EC2) and @aws-sdk/ec2-metadata-service's MetadataService.
'use strict';
const {fromInstanceMetadata} = require('@smithy/credential-provider-imds');
const {MetadataService} = require('@aws-sdk/ec2-metadata-service');
const run = require('./run.js');

const service = new MetadataService({httpOptions: {timeout: 2000}});
const get = (path) => service.request(path, {});
run([
  ['credentials', async () => {
    const credentials = await fromInstanceMetadata({timeout: 2000, maxRetries: 1})();
    return {...credentials, expiration: credentials.expiration.toISOString()};
  }],
  ['token', () => service.fetchMetadataToken()],
  ['instance_id', () => get('/latest/meta-data/instance-id')],
  ['availability_zone', () => get('/latest/meta-data/placement/availability-zone')],
  ['region', () => get('/latest/meta-data/placement/region')],
  ['document', async () => JSON.parse(await get('/latest/dynamic/instance-identity/document'))],
  ['roles', () => get('/latest/meta-data/iam/security-credentials/')],
  ['missing', () => get('/latest/meta-data/no-such-key')],
]);
